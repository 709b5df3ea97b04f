"""What the LDAP target refuses to do: write over a foreign entry's uid or gid, leak its bind password,
or let one bad entry stop the others. (That it plans nothing on a partial read, a paged search cut by
the server's size limit, is in test_contract.py, as for every target.)"""

from __future__ import annotations

from collections.abc import Callable

from ldap3 import MODIFY_ADD
from sqlalchemy import update

from sup.config.targets import target_context
from sup.groups.service import delete_group
from sup.reconcile.planner import desired_state
from sup.store.models import User
from sup.targets.ldap import SPEC, LdapTarget
from tests.conftest import ACTOR
from tests.ldap.site import Site
from tests.support.ports import free_port
from tests.support.slapd import SERVICE_PASSWORD, SlapdServer


def _add_foreign(site: Site) -> str:
    staff = f"ou=staff,{site.base_dn}"
    account = {"uid": "legacy", "cn": "legacy", "sn": "legacy", "uidNumber": 10000, "gidNumber": 100,
               "homeDirectory": "/home/legacy"}  # fmt: skip
    namesake = {"uid": "saul", "cn": "saul", "sn": "saul", "uidNumber": 30000, "gidNumber": 100,
                "homeDirectory": "/home/saul"}  # fmt: skip
    wildcard = {"uid": "*", "cn": "*", "sn": "*", "uidNumber": 30001, "gidNumber": 100, "homeDirectory": "/"}
    with site.admin() as c:
        assert c.add(staff, ["organizationalUnit"], {"ou": "staff"})[0]
        assert c.add(f"uid=legacy,{staff}", ["inetOrgPerson", "posixAccount"], account)[0]
        assert c.add(f"uid=saul,{staff}", ["inetOrgPerson", "posixAccount"], namesake)[0]
        assert c.add(f"uid=\\2a,{staff}", ["inetOrgPerson", "posixAccount"], wildcard)[0]
        if site.slapd.schema == "rfc2307":
            classes, group = ["posixGroup"], {"cn": "physics", "gidNumber": 60000}
        else:
            group = {"cn": "physics", "gidNumber": 60000, "member": f"uid=legacy,{staff}"}
            classes = ["groupOfNames", "posixGroup"]
        assert c.add(f"cn=physics,{staff}", classes, group)[0]
    return staff


def test_collisions_with_foreign_entries_are_errors_of_their_user_and_never_written(
    make_site: Callable[..., Site], any_slapd: SlapdServer
) -> None:
    site = make_site(any_slapd, admin_groups=["physics"])
    staff = _add_foreign(site)
    foreign_before = {dn: site.entry(dn) for dn in site.dns(staff)}
    site.add_user("kim")  # uidNumber 10000, like uid=legacy
    site.add_user("saul")  # uid saul, like uid=saul,ou=staff
    site.add_user("bob")
    site.add_group("physics", members=["kim", "bob"])  # group name physics, like cn=physics,ou=staff

    planned = site.plan()
    reports = {
        (c.kind, c.name, c.subject): str(c.details_json()["error"])
        for c in planned.changes
        if c.action == "report"
    }
    assert set(reports) == {("user", "kim", "kim"), ("user", "saul", "saul"), ("group", "physics", None)}
    assert f"uidNumber 10000 is already used by uid=legacy,{staff}" in reports["user", "kim", "kim"]
    assert f"uid saul is already used by uid=saul,{staff}" in reports["user", "saul", "saul"]
    assert f"group name physics is already used by cn=physics,{staff}" in reports["group", "physics", None]
    written = {(c.kind, c.name) for c in planned.changes if c.action != "report"}
    assert written.isdisjoint(
        {("user", "kim"), ("user", "saul"), ("group", "physics"), ("sudo_role", "physics")}
    )
    assert ("user", "bob") in written

    result = site.reconcile()
    assert result.targets[0].state == "partial"
    assert site.entry(site.user_dn("kim")) is None and site.entry(site.user_dn("saul")) is None
    assert site.entry(site.group_dn("physics")) is None
    assert site.entry(f"cn=physics,{site.sudoers_dn}") is None
    assert site.entry(site.user_dn("bob")) is not None
    statuses = site.statuses()
    assert statuses["bob"] == ("in_sync", None)
    assert statuses["kim"][0] == "error" and "uidNumber 10000" in (statuses["kim"][1] or "")
    assert statuses["saul"][0] == "error" and "uid saul" in (statuses["saul"][1] or "")
    assert {dn: site.entry(dn) for dn in site.dns(staff)} == foreign_before

    with site.admin() as c:
        assert c.delete(f"uid=legacy,{staff}")[0]
    site.reconcile()
    assert site.entry(site.user_dn("kim")) is not None
    assert site.statuses()["kim"] == ("in_sync", None)


def test_a_collision_appearing_later_freezes_the_entry_and_withdraws_sudo(
    make_site: Callable[..., Site], slapd: SlapdServer
) -> None:
    site = make_site(slapd, admin_groups=["ops"])
    site.add_user("kim")
    site.add_group("ops", members=["kim"])
    site.converge()
    assert site.entry(f"cn=ops,{site.sudoers_dn}") is not None

    with site.admin() as c:
        assert c.add(f"ou=staff,{site.base_dn}", ["organizationalUnit"], {"ou": "staff"})[0]
        group = {"cn": "ops", "gidNumber": 60001, "member": f"uid=mallory,ou=staff,{site.base_dn}"}
        assert c.add(f"cn=ops,ou=staff,{site.base_dn}", ["groupOfNames", "posixGroup"], group)[0]
    site.update_group("ops", description="Operators")
    planned = site.plan()
    assert {(c.action, c.kind, c.name) for c in planned.changes} == {
        ("report", "group", "ops"),
        ("delete", "sudo_role", "ops"),  # %ops would now also name the foreign group's members
    }
    site.reconcile()
    assert site.entry(f"cn=ops,{site.sudoers_dn}") is None
    ops = site.entry(site.group_dn("ops"))
    assert ops is not None and "description" not in ops  # frozen, not updated


def test_bind_failures_are_clear_and_never_show_the_password(any_server_site: Site) -> None:
    site = any_server_site
    wrong = "wrong-password-that-must-not-leak"
    site.settings = site.with_settings(bind_password=wrong)
    result = site.plan()
    error = result.targets[0].error or ""
    assert (
        result.targets[0].state == "error" and "invalidCredentials" in error and "cn=sup,ou=services" in error
    )
    assert wrong not in error and SERVICE_PASSWORD not in error

    site.settings = site.with_settings(url=f"ldap://127.0.0.1:{free_port()}")
    result = site.plan()
    assert result.targets[0].state == "error" and "cannot connect to ldap://127.0.0.1:" in (
        result.targets[0].error or ""
    )
    assert SERVICE_PASSWORD not in (result.targets[0].error or "")


def test_a_missing_base_dn_is_an_error_not_a_plan(any_server_site: Site) -> None:
    site = any_server_site
    site.add_user("kim")
    site.settings = site.with_settings(base_dn=f"ou=missing,{site.base_dn}")
    result = site.reconcile()
    assert result.targets[0].state == "error"
    assert f"base_dn ou=missing,{site.base_dn} does not exist" in (result.targets[0].error or "")
    assert site.last_writes == 0


def test_one_entry_the_server_refuses_does_not_stop_the_others(any_server_site: Site) -> None:
    site = any_server_site
    site.add_user("kim")
    site.add_user("jurgen")
    # A home stored before homes were checked (the API refuses it now): homeDirectory is an IA5
    # (ASCII) string, so slapd refuses this one entry.
    with site.sessions.begin() as session:
        session.execute(update(User).where(User.username == "jurgen").values(home_directory="/home/jürgen"))
    site.add_group("physics", members=["kim", "jurgen"])
    result = site.reconcile()
    target = result.targets[0]
    assert target.state == "partial"
    failed = {(f.change.action, f.change.kind, f.change.name, f.change.subject) for f in target.failed}
    assert failed == {("create", "user", "jurgen", "jurgen"), ("create", "group", "physics", "jurgen")}
    assert all(
        "invalidAttributeSyntax" in f.error or "creating user jurgen failed" in f.error for f in target.failed
    )
    assert site.entry(site.user_dn("kim")) is not None
    physics = site.entry(site.group_dn("physics"))
    assert physics is not None and [m.lower() for m in physics["member"]] == [site.user_dn("kim").lower()]
    statuses = site.statuses()
    assert statuses["kim"] == ("in_sync", None) and statuses["jurgen"][0] == "error"


def test_a_stale_plan_applies_cleanly(any_server_site: Site) -> None:
    site = any_server_site
    """Writes are idempotent: a member already added, or an entry already gone, is not an error."""
    site.add_user("kim")
    site.add_user("saul")
    site.add_group("physics", members=["kim"])
    site.add_group("old")
    site.converge()
    site.update_group("physics", members=["kim", "saul"])
    with site.sessions.begin() as session:
        delete_group(session, site.settings, ACTOR, "old")
    target = LdapTarget(target_context(SPEC, site.settings))
    try:
        changes = target.diff(desired_state(site.sessions, site.settings), target.observe())
        assert {(c.action, c.name) for c in changes} == {("add_members", "physics"), ("delete", "old")}
        with site.admin() as c:  # somebody else does the same meanwhile
            assert c.modify(site.group_dn("physics"), {"member": [(MODIFY_ADD, [site.user_dn("saul")])]})[0]
            assert c.delete(site.group_dn("old"))[0]
        report = target.apply(changes)
        assert report.failed == [] and len(report.applied) == 2
    finally:
        target.close()
