"""The LDAP target on a pass the outbox scoped (run_pass scoped=True, the reconciler's pass after
writes): it reads only the named users and the groups around them, plans only what they own, leaves
other drift to the full pass, and never deletes what it did not name."""

from __future__ import annotations

from collections.abc import Callable

from ldap3 import MODIFY_DELETE, MODIFY_REPLACE

from sup.reconcile.planner import TargetPass, run_pass
from sup.store.outbox import mark_dirty
from tests.ldap.site import Site
from tests.support.slapd import SlapdServer

MEMBERS = [f"m{i:02d}" for i in range(30)]


def _pass(site: Site, *, scoped: bool) -> TargetPass:
    result = run_pass(site.settings, site.sessions, apply=True, scoped=scoped, opener=site._open)
    (ldap,) = [t for t in result.targets if t.target == "ldap"]
    assert ldap.state in ("applied", "planned"), (ldap.state, ldap.error)
    return ldap


def _members(site: Site, group: str) -> set[str]:
    entry = site.entry(site.group_dn(group))
    assert entry is not None, f"group {group} is missing"
    values = entry.get("memberUid") or entry.get("member") or []
    return {v.split(",")[0].removeprefix("uid=").lower() for v in values}


def _summary(ldap: TargetPass) -> set[tuple[str, str, str, str | None]]:
    return {(c.action, c.kind, c.name, c.subject) for c in ldap.changes}


def test_a_scoped_pass_reads_and_plans_only_what_the_writes_named(
    make_site: Callable[..., Site], any_slapd: SlapdServer
) -> None:
    site = make_site(any_slapd)
    for name in ["kim", "saul", *MEMBERS]:
        site.add_user(name)
    site.add_group("physics", members=["kim", "saul", *MEMBERS])
    site.add_group("chem", members=["kim"])
    site.add_group("old")
    site.converge()
    _pass(site, scoped=False)  # clears the outbox
    with site.admin() as c:  # drift nobody reported
        assert c.modify(site.user_dn("saul"), {"loginShell": [(MODIFY_REPLACE, ["/bin/sh"])]})[0]
        value = site.user_dn("m00") if any_slapd.schema == "rfc2307bis" else "m00"
        attribute = "member" if any_slapd.schema == "rfc2307bis" else "memberUid"
        assert c.modify(site.group_dn("physics"), {attribute: [(MODIFY_DELETE, [value])]})[0]

    site.add_user("lalo", groups=["physics"])  # push to login: a new member of a big group
    site.update_user("kim", active=False)  # a suspension: locked, out of every group
    scoped = _pass(site, scoped=True)

    assert scoped.scoped and scoped.state == "applied"
    assert _summary(scoped) == {
        ("create", "user", "lalo", "lalo"),
        ("create", "group", "lalo", "lalo"),
        ("add_members", "group", "physics", "lalo"),
        ("update", "user", "kim", "kim"),
        ("remove_members", "group", "physics", "kim"),
        ("remove_members", "group", "chem", "kim"),
        *([("add_members", "group", "chem", None)] if any_slapd.schema == "rfc2307bis" else []),
    }
    target = site.targets[-1]
    assert target.connection.searches <= 6  # users, groups, and the collision read of base_dn
    kim = site.entry(site.user_dn("kim"))
    assert kim is not None and kim["loginShell"] == ["/usr/sbin/nologin"]
    assert _members(site, "physics") == {"saul", "lalo", *MEMBERS[1:]}  # m00's drift waits
    saul = site.entry(site.user_dn("saul"))
    assert saul is not None and saul["loginShell"] == ["/bin/sh"]
    assert site.statuses()["lalo"] == ("in_sync", None)

    full = _pass(site, scoped=False)
    assert not full.scoped and _summary(full) == {
        ("update", "user", "saul", "saul"),
        ("add_members", "group", "physics", "m00"),
    }
    assert _members(site, "physics") == {"saul", "lalo", *MEMBERS}

    with site.sessions.begin() as session:  # the same names again: nothing left to do
        for kind, name in [("user", "lalo"), ("user", "kim"), ("group", "physics"), ("group", "lalo")]:
            mark_dirty(session, kind, name)  # type: ignore[arg-type]
    again = _pass(site, scoped=True)
    assert again.scoped and again.changes == [] and site.last_writes == 0


def test_a_scoped_pass_deletes_only_what_it_names(site: Site) -> None:
    site.add_user("kim")
    site.add_user("saul")
    site.add_group("physics", members=["kim", "saul"])
    site.converge()
    _pass(site, scoped=False)
    stranger_dn = f"uid=stranger,{site.users_dn}"
    with site.admin() as c:  # an entry the store does not know: the full pass deletes it
        stranger = {"uid": "stranger", "cn": "S", "sn": "S", "uidNumber": 19999, "gidNumber": 19999,
                    "homeDirectory": "/home/stranger"}  # fmt: skip
        assert c.add(stranger_dn, ["inetOrgPerson", "posixAccount"], stranger)[0]
        stray = {"cn": "stray", "gidNumber": 19998, "member": [site.user_dn("kim")]}
        assert c.add(site.group_dn("stray"), ["groupOfNames", "posixGroup"], stray)[0]

    site.delete_user("kim")
    scoped = _pass(site, scoped=True)
    assert scoped.scoped and _summary(scoped) == {
        ("delete", "user", "kim", "kim"),
        ("delete", "group", "kim", None),
        ("remove_members", "group", "physics", "kim"),
    }
    assert site.entry(site.user_dn("kim")) is None and site.entry(site.group_dn("kim")) is None
    assert _members(site, "physics") == {"saul"}
    assert site.entry(stranger_dn) is not None and site.entry(site.group_dn("stray")) is not None

    full = _pass(site, scoped=False)
    assert {(c.action, c.name) for c in full.changes} == {("delete", "stranger"), ("delete", "stray")}


def test_a_pass_naming_an_admin_group_reads_everything(
    make_site: Callable[..., Site], slapd: SlapdServer
) -> None:
    site = make_site(slapd, admin_groups=["ops"])
    site.add_user("kim")
    site.add_group("ops")
    site.converge()
    _pass(site, scoped=False)
    site.update_group("ops", members=["kim"])
    assert not _pass(site, scoped=True).scoped
    site.update_user("kim", login_shell="/bin/zsh")
    assert _pass(site, scoped=True).scoped
