"""A full pass after one that planned nothing reads only the entries' versions (entryCSN), and still
finds every change made since: by hand in the directory, in the store, or by time (unchanged.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from ldap3 import MODIFY_REPLACE

from sup.config.targets import target_context
from sup.reconcile.planner import desired_state
from sup.targets.ldap import SPEC, LdapTarget, unchanged
from sup.targets.ldap.model import Observed
from tests.ldap.site import LdapServer, Site
from tests.support.ds389 import Ds389Server
from tests.support.slapd import SlapdServer


@pytest.fixture
def quiet_site(make_site: Callable[..., Site], slapd: SlapdServer) -> Site:
    """Two users in a group, a foreign OU beside SUP's with a leaf entry in it, converged: the last
    pass planned nothing, so the next full pass may read versions only."""
    site = make_site(slapd)
    site.add_user("kim")
    site.add_user("saul")
    site.add_group("physics", members=["kim", "saul"])
    with site.admin() as c:
        assert c.add(f"ou=staff,{site.base_dn}", ["organizationalUnit"], {"ou": "staff"})[0]
        assert c.add(f"ou=leaf,ou=staff,{site.base_dn}", ["organizationalUnit"], {"ou": "leaf"})[0]
    site.converge()
    return site


@pytest.fixture
def target(quiet_site: Site) -> Iterator[LdapTarget]:
    opened = LdapTarget(target_context(SPEC, quiet_site.settings))
    yield opened
    opened.close()


def _plan(site: Site, target: LdapTarget) -> tuple[Observed, set[tuple[str, str, str]]]:
    """One full observe and diff by `target`: the Observed and the changes (action, kind, name)."""
    observed = target.observe()
    changes = target.diff(desired_state(site.sessions, site.settings), observed)
    return observed, {(c.action, c.kind, c.name) for c in changes}


def test_a_full_pass_after_one_that_planned_nothing_reads_only_versions(
    quiet_site: Site, target: LdapTarget
) -> None:
    before = target.connection.searches
    observed, changes = _plan(quiet_site, target)
    assert observed.hollow and observed.entries == {} and changes == set()
    assert target.connection.searches - before == 6  # 3 OUs, the base, its children, ou=staff below

    quiet_site.add_user("jo")  # the store changed, the directory did not: read in full after all
    observed, changes = _plan(quiet_site, target)
    assert observed.hollow and changes == {
        ("create", "user", "jo"),
        ("create", "group", "jo"),
    }  # and its group


def test_a_hand_made_change_after_a_quiet_pass_is_planned(quiet_site: Site, target: LdapTarget) -> None:
    site = quiet_site
    with site.admin() as c:
        assert c.modify(site.user_dn("kim"), {"loginShell": [(MODIFY_REPLACE, ["/bin/sh"])]})[0]
    observed, changes = _plan(site, target)
    assert not observed.hollow and changes == {("update", "user", "kim")}
    site.converge()


def test_an_entry_deleted_by_hand_after_a_quiet_pass_is_made_again(
    quiet_site: Site, target: LdapTarget
) -> None:
    site = quiet_site
    with site.admin() as c:
        assert c.delete(site.group_dn("physics"))[0]
    observed, changes = _plan(site, target)
    assert not observed.hollow and changes == {("create", "group", "physics")}


def test_an_entry_renamed_by_hand_after_a_quiet_pass_is_seen(quiet_site: Site, target: LdapTarget) -> None:
    site = quiet_site
    with site.admin() as c:
        assert c.modify_dn(site.user_dn("saul"), "uid=paul")[0]
    observed, changes = _plan(site, target)
    assert not observed.hollow
    assert ("create", "user", "saul") in changes and ("delete", "user", "paul") in changes


def test_a_colliding_entry_below_a_foreign_leaf_after_a_quiet_pass_is_seen(
    quiet_site: Site, target: LdapTarget
) -> None:
    """The new entry sits below an entry that had no children: only the walk, which looks below it
    now that it has some, can find it; no entry SUP read before changed its entryCSN."""
    site = quiet_site
    namesake = {"uid": "kim", "cn": "kim", "sn": "kim", "uidNumber": 30000, "gidNumber": 100,
                "homeDirectory": "/home/kim"}  # fmt: skip
    with site.admin() as c:
        assert c.add(f"uid=kim,ou=leaf,ou=staff,{site.base_dn}", ["inetOrgPerson", "posixAccount"], namesake)[
            0
        ]
    observed, changes = _plan(site, target)
    assert not observed.hollow and ("report", "user", "kim") in changes


def test_a_full_read_is_due_after_a_while_whatever_the_versions(
    quiet_site: Site, target: LdapTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unchanged, "FULL_READ_EVERY", 0.0)
    observed, changes = _plan(quiet_site, target)
    assert not observed.hollow and observed.entries and changes == set()


def test_a_pass_that_writes_forgets_the_quiet_one(quiet_site: Site, target: LdapTarget) -> None:
    quiet_site.add_user("jo")
    quiet_site.reconcile()  # writes jo: the next full pass reads in full without asking for versions
    before = target.connection.searches
    observed, changes = _plan(quiet_site, target)
    assert not observed.hollow and changes == set()
    assert target.connection.searches - before == 6
    observed, changes = _plan(quiet_site, target)
    assert observed.hollow and changes == set()


def test_a_server_without_entry_versions_is_always_read_in_full(
    make_site: Callable[..., Site], ds389: Ds389Server
) -> None:
    server: LdapServer = ds389.in_mode("rfc2307bis")
    site = make_site(server)
    site.add_user("kim")
    site.converge()
    opened = LdapTarget(target_context(SPEC, site.settings))
    try:
        observed, changes = _plan(site, opened)
    finally:
        opened.close()
    assert observed.versions is None and not observed.hollow and observed.entries and changes == set()
