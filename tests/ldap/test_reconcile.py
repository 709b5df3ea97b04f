"""The LDAP target against a real slapd: what a pass writes, that a second pass writes nothing,
deactivation, drift repair, unknown entries, and the directory shapes (rfc2307bis and rfc2307).
What every target promises (entries outside SUP's OUs untouched among them) is in test_contract.py."""

from __future__ import annotations

from collections.abc import Callable

from ldap3 import MODIFY_ADD, MODIFY_DELETE, MODIFY_REPLACE

from tests.ldap.site import LdapServer, Site
from tests.support.ds389 import Ds389Server
from tests.support.keys import ed25519_key
from tests.support.slapd import SlapdServer

PLACEHOLDER = "cn=empty-membership-placeholder"


def _members(site: Site, group: str) -> set[str]:
    entry = site.entry(site.group_dn(group))
    assert entry is not None, f"group {group} is missing"
    if site.settings.ldap and site.settings.ldap.schema_ == "rfc2307":
        return set(entry.get("memberUid", []))
    return {m.lower() for m in entry.get("member", [])}


def test_a_pass_writes_users_and_groups_as_the_store_says(
    make_site: Callable[..., Site], any_slapd: SlapdServer
) -> None:
    site = make_site(any_slapd)
    key = ed25519_key("kim@laptop")
    site.add_user(
        "kim",
        display_name="Kim Wéxler",
        given_name="Kim",
        family_name="Wéxler",
        email="kim@example.org",
        ssh_public_keys=[key],
    )
    site.add_user("saul", login_shell="/bin/zsh")
    site.add_group("physics", description="Physics department", members=["kim", "saul"])
    site.add_group("empty")

    site.converge()

    kim = site.entry(site.user_dn("kim"))
    assert kim is not None
    assert {"inetOrgPerson", "posixAccount", "ldapPublicKey"} <= set(kim["objectClass"])
    assert kim["uid"] == ["kim"] and kim["cn"] == ["Kim Wéxler"] and kim["sn"] == ["Wéxler"]
    assert kim["givenName"] == ["Kim"] and kim["mail"] == ["kim@example.org"]
    assert kim["uidNumber"] == ["10000"] and kim["gidNumber"] == ["10000"]
    assert kim["homeDirectory"] == ["/home/kim"] and kim["loginShell"] == ["/bin/bash"]
    assert kim["gecos"] == ["Kim Wexler"]  # IA5: accents folded
    assert kim["sshPublicKey"] == [key]
    saul = site.entry(site.user_dn("saul"))
    assert saul is not None and saul["loginShell"] == ["/bin/zsh"] and saul["sn"] == ["saul"]
    assert "mail" not in saul and "givenName" not in saul and "sshPublicKey" not in saul

    physics = site.entry(site.group_dn("physics"))
    assert physics is not None and physics["gidNumber"] == ["50000"]
    assert physics["description"] == ["Physics department"]
    private = site.entry(site.group_dn("kim"))
    assert private is not None and private["gidNumber"] == ["10000"]
    if any_slapd.schema == "rfc2307bis":
        assert {"groupOfNames", "posixGroup"} <= set(physics["objectClass"])
        assert _members(site, "physics") == {site.user_dn("kim").lower(), site.user_dn("saul").lower()}
        assert _members(site, "empty") == {PLACEHOLDER}  # groupOfNames needs a member
        assert [m.lower() for m in kim["memberOf"]] == [site.group_dn("physics").lower()]  # memberof overlay
    else:
        assert physics["objectClass"] == ["posixGroup"]
        assert _members(site, "physics") == {"kim", "saul"}
        assert _members(site, "empty") == set()
    assert site.statuses() == {"kim": ("in_sync", None), "saul": ("in_sync", None)}


def test_store_changes_become_attribute_and_membership_deltas(site: Site) -> None:
    site.add_user("kim", ssh_public_keys=[ed25519_key("one")])
    site.add_user("saul")
    site.add_group("physics", members=["kim"])
    site.converge()

    second = ed25519_key("two")
    site.update_user("kim", display_name="Kimberly Wexler", ssh_public_keys=[second], login_shell="/bin/zsh")
    site.update_group("physics", members=["saul"])
    planned = site.plan()
    summary = {(c.action, c.name, c.subject) for c in planned.changes}
    assert summary == {
        ("update", "kim", "kim"),
        ("add_members", "physics", "saul"),
        ("remove_members", "physics", "kim"),
    }
    update = next(c for c in planned.changes if c.action == "update")
    assert update.details_json()["loginShell"] == {"old": "/bin/bash", "new": "/bin/zsh"}
    assert update.details_json()["cn"] == {"old": "kim", "new": "Kimberly Wexler"}
    assert update.details_json()["sshPublicKey"]["new"] == second

    site.converge()
    kim = site.entry(site.user_dn("kim"))
    assert kim is not None and kim["sshPublicKey"] == [second] and kim["gecos"] == ["Kimberly Wexler"]
    assert _members(site, "physics") == {site.user_dn("saul").lower()}


def test_the_last_member_leaving_keeps_the_group(
    make_site: Callable[..., Site], any_slapd: SlapdServer
) -> None:
    site = make_site(any_slapd)
    site.add_user("kim")
    site.add_group("physics", members=["kim"])
    site.converge()
    site.update_group("physics", members=[])
    site.converge()
    expected = {PLACEHOLDER} if any_slapd.schema == "rfc2307bis" else set()
    assert _members(site, "physics") == expected
    site.update_group("physics", members=["kim"])
    site.converge()
    assert _members(site, "physics") == {
        site.user_dn("kim").lower() if any_slapd.schema == "rfc2307bis" else "kim"
    }


def test_389_groups_need_no_placeholder(make_site: Callable[..., Site], ds389: Ds389Server) -> None:
    """389's groupOfNames may have no member (docs/ldap.md): empty_group_member null works there, and
    the MemberOf plugin's nsMemberOf class on the users is left alone."""
    site = make_site(ds389.in_mode("rfc2307bis"), empty_group_member=None)
    site.add_user("kim")
    site.add_group("physics", members=["kim"])
    site.add_group("empty")
    site.converge()
    assert _members(site, "empty") == set()
    kim = site.entry(site.user_dn("kim"))
    assert kim is not None and "nsMemberOf" in kim["objectClass"]
    assert [m.lower() for m in kim["memberOf"]] == [site.group_dn("physics").lower()]
    site.update_group("physics", members=[])
    site.converge()
    assert _members(site, "physics") == set()
    assert site.plan().changes == []


def test_deactivated_user_is_locked_not_deleted(
    make_site: Callable[..., Site], any_slapd: SlapdServer
) -> None:
    site = make_site(any_slapd)
    site.add_user("kim", ssh_public_keys=[ed25519_key()])
    site.add_group("physics", members=["kim"])
    site.converge()

    site.update_user("kim", active=False)
    site.converge()
    kim = site.entry(site.user_dn("kim"))
    assert kim is not None
    assert kim["loginShell"] == ["/usr/sbin/nologin"] and "sshPublicKey" not in kim
    assert site.entry(site.group_dn("kim")) is not None  # the private group stays while locked
    assert _members(site, "physics") == ({PLACEHOLDER} if any_slapd.schema == "rfc2307bis" else set())

    site.update_user("kim", active=True)
    site.converge()
    kim = site.entry(site.user_dn("kim"))
    assert kim is not None and kim["loginShell"] == ["/bin/bash"]
    assert len(_members(site, "physics")) == 1


def test_deactivated_user_is_deleted_with_the_delete_policy(
    make_site: Callable[..., Site], slapd: SlapdServer
) -> None:
    site = make_site(slapd, deactivated="delete", unknown_entries="report")
    site.add_user("kim")
    site.add_user("saul")
    site.add_group("physics", members=["kim", "saul"])
    site.converge()

    site.update_user("kim", active=False)
    planned = site.plan()
    assert {(c.action, c.kind, c.name, c.subject) for c in planned.changes} == {
        ("remove_members", "group", "physics", "kim"),
        ("delete", "user", "kim", "kim"),
        ("delete", "group", "kim", "kim"),
    }
    site.converge()
    assert site.entry(site.user_dn("kim")) is None and site.entry(site.group_dn("kim")) is None
    assert _members(site, "physics") == {site.user_dn("saul").lower()}
    assert site.statuses()["kim"] == ("in_sync", None)


def test_renamed_user_moves_with_their_memberships(site: Site) -> None:
    site.add_user("kim")
    site.add_group("physics", members=["kim"])
    site.converge()
    site.update_user("kim", username="kimw")
    site.converge()
    assert site.entry(site.user_dn("kim")) is None and site.entry(site.group_dn("kim")) is None
    kimw = site.entry(site.user_dn("kimw"))
    assert kimw is not None and kimw["uidNumber"] == ["10000"]
    assert _members(site, "physics") == {site.user_dn("kimw").lower()}


def test_hand_made_drift_is_planned_and_repaired(site: Site) -> None:
    site.add_user("kim")
    site.add_user("saul")
    site.add_group("physics", members=["kim", "saul"])
    site.add_group("empty")
    site.converge()

    stranger_dn = f"uid=stranger,{site.users_dn}"
    with site.admin() as c:
        assert c.modify(site.user_dn("kim"), {"loginShell": [(MODIFY_REPLACE, ["/bin/sh"])]})[0]
        assert c.modify(site.user_dn("kim"), {"description": [(MODIFY_REPLACE, ["not SUP's"])]})[0]
        physics = site.group_dn("physics")
        assert c.modify(physics, {"member": [(MODIFY_ADD, [f"uid=intruder,{site.base_dn}"])]})[0]
        assert c.modify(physics, {"member": [(MODIFY_DELETE, [site.user_dn("saul")])]})[0]
        assert c.delete(site.group_dn("empty"))[0]
        stranger = {"uid": "stranger", "cn": "S", "sn": "S", "uidNumber": 19999, "gidNumber": 19999,
                    "homeDirectory": "/home/stranger"}  # fmt: skip
        assert c.add(stranger_dn, ["inetOrgPerson", "posixAccount"], stranger)[0]

    planned = site.plan()
    assert {(c.action, c.kind, c.name, c.subject) for c in planned.changes} == {
        ("update", "user", "kim", "kim"),
        ("add_members", "group", "physics", "saul"),
        ("remove_members", "group", "physics", None),
        ("create", "group", "empty", None),
        ("delete", "user", "stranger", "stranger"),
    }
    update = next(c for c in planned.changes if c.action == "update")
    assert dict(update.details_json()) == {
        "dn": site.user_dn("kim"),
        "loginShell": {"old": "/bin/sh", "new": "/bin/bash"},
    }

    site.converge()
    kim = site.entry(site.user_dn("kim"))
    assert kim is not None and kim["loginShell"] == ["/bin/bash"]
    assert kim["description"] == ["not SUP's"]  # not an attribute SUP owns: left alone
    assert _members(site, "physics") == {site.user_dn("kim").lower(), site.user_dn("saul").lower()}
    assert site.entry(site.group_dn("empty")) is not None
    assert site.entry(stranger_dn) is None


def test_unknown_entries_are_only_reported_when_configured(
    make_site: Callable[..., Site], slapd: SlapdServer
) -> None:
    site = make_site(slapd, unknown_entries="report")
    site.add_user("kim")
    site.converge()
    nested = f"ou=nested,{site.groups_dn}"
    with site.admin() as c:
        assert c.add(nested, ["organizationalUnit"], {"ou": "nested"})[0]
        assert c.add(f"cn=odd,{nested}", ["groupOfNames"], {"cn": "odd", "member": site.user_dn("kim")})[0]
    result = site.reconcile()
    assert result.ok and site.last_writes == 0
    assert {(c.action, c.kind, c.name) for c in result.changes} == {
        ("report", "ou", "nested"),
        ("report", "entry", "odd"),
    }
    assert site.entry(nested) is not None


def test_unknown_subtrees_are_deleted_deepest_first(site: Site) -> None:
    site.add_user("kim")
    site.converge()
    nested = f"ou=nested,{site.groups_dn}"
    with site.admin() as c:
        assert c.add(nested, ["organizationalUnit"], {"ou": "nested"})[0]
        assert c.add(f"ou=deeper,{nested}", ["organizationalUnit"], {"ou": "deeper"})[0]
        assert c.add(
            f"cn=odd,ou=deeper,{nested}", ["groupOfNames"], {"cn": "odd", "member": site.user_dn("kim")}
        )[0]
    site.converge()
    assert site.dns(site.groups_dn) == {site.groups_dn.lower(), site.group_dn("kim").lower()}


def test_a_missing_auxiliary_class_is_added(site: Site) -> None:
    site.add_user("kim")
    with site.admin() as c:
        assert c.add(site.users_dn, ["organizationalUnit"], {"ou": "people"})[0]
        attributes = {"uid": "kim", "cn": "kim", "sn": "kim", "uidNumber": 10000, "gidNumber": 10000,
                      "homeDirectory": "/home/kim", "loginShell": "/bin/bash", "gecos": "kim"}  # fmt: skip
        assert c.add(site.user_dn("kim"), ["inetOrgPerson", "posixAccount"], attributes)[0]
    planned = site.plan()
    update = next(c for c in planned.changes if c.kind == "user")
    assert update.action == "update" and set(update.details_json()) == {"dn", "objectClass"}
    site.converge()
    kim = site.entry(site.user_dn("kim"))
    assert kim is not None and "ldapPublicKey" in kim["objectClass"]


def test_paged_reads_see_every_entry(make_site: Callable[..., Site], any_server: LdapServer) -> None:
    site = make_site(any_server, page_size=3)
    for i in range(8):
        site.add_user(f"user{i}")
    site.converge()
    assert len(site.dns(site.users_dn)) == 9
    site.reconcile()
    assert site.targets[-1].connection.searches >= 6  # several pages per OU, and the checks around them
