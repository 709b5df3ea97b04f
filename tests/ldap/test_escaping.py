"""Names and values with the characters that are special in DNs and filters
(`* ( ) \\ , = + < > # ; "`, NUL, leading and trailing spaces) cannot address another entry or widen
a search: the domain rules refuse them as names with a clear error, the target refuses them again
should one reach it, and the DNs it builds keep any value inside one RDN on a real server."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from ldap3 import BASE, LEVEL
from pydantic import ValidationError

from sup.config import Settings
from sup.config.targets import target_context
from sup.domain.desired import DesiredGroup, DesiredState, DesiredUser
from sup.groups.schemas import GroupCreate
from sup.targets.ldap import SPEC, LdapTarget
from sup.targets.ldap import dn as dnlib
from sup.targets.ldap.layout import Layout
from sup.users.schemas import UserCreate
from tests.ldap.site import Site
from tests.support.slapd import SlapdServer

HOSTILE = [
    "kim,ou=admins", "*)(uid=*", "*", "(x)", "a\\b", 'q"uote', "#lead", " lead", "trail ", "a+b=c",
    "x;y", "<tag>", "nul\x00byte", "victim,ou=staff",
]  # fmt: skip


@pytest.mark.parametrize("name", HOSTILE)
def test_the_domain_refuses_them_as_names_with_a_clear_error(name: str) -> None:
    with pytest.raises(ValidationError) as user_error:
        UserCreate(username=name)
    with pytest.raises(ValidationError) as group_error:
        GroupCreate(name=name)
    for error in (user_error.value, group_error.value):
        message = str(error)
        assert "use lower-case letters, digits, '_' and '-'" in message
        assert "not allowed" in message or "must start" in message


def _user(name: str, uid: int) -> DesiredUser:
    return DesiredUser(name, uid, uid, None, None, None, None, "/home/x", "/bin/bash", (), True)


def test_the_target_refuses_them_too_and_touches_nothing_else(
    make_site: Callable[..., Site], slapd: SlapdServer
) -> None:
    site = make_site(slapd)
    staff = f"ou=staff,{site.base_dn}"
    with site.admin() as c:
        assert c.add(staff, ["organizationalUnit"], {"ou": "staff"})[0]
        assert c.add(f"uid=victim,{staff}", ["account"], {"uid": "victim"})[0]
    decoy = site.entry(f"uid=victim,{staff}")
    users = {name: _user(name, 20000 + i) for i, name in enumerate(HOSTILE)}
    users["kim"] = _user("kim", 10000)
    groups = {"physics": DesiredGroup("physics", 50000, None, frozenset(users), False)}
    for i, name in enumerate(HOSTILE):
        groups[f"g{i}"] = DesiredGroup(name, 51000 + i, None, frozenset({"kim"}), False)
    desired = DesiredState(users=users, groups={g.name: g for g in groups.values()})

    target = LdapTarget(target_context(SPEC, site.settings))
    try:
        changes = target.diff(desired, target.observe())
        refused = {(c.kind, c.name): str(c.details_json()["error"]) for c in changes if c.action == "report"}
        assert set(refused) == {("user", n) for n in HOSTILE} | {("group", n) for n in HOSTILE}
        assert all("SUP does not write it to LDAP" in e for e in refused.values())
        ous = {("create", "ou", dn) for dn in (site.users_dn, site.groups_dn, site.sudoers_dn)}
        assert {(c.action, c.kind, c.name) for c in changes if c.action != "report"} == ous | {
            ("create", "user", "kim"),
            ("create", "group", "physics"),
        }
        report = target.apply(changes)
        assert {f.change.name for f in report.failed} == set(HOSTILE)  # reported, per user and group
        again = target.diff(desired, target.observe())
        assert [c for c in again if c.action != "report"] == []
    finally:
        target.close()
    assert site.entry(f"uid=victim,{staff}") == decoy
    physics = site.entry(site.group_dn("physics"))
    assert physics is not None and [m.lower() for m in physics["member"]] == [site.user_dn("kim").lower()]
    assert site.dns(site.users_dn) == {site.users_dn.lower(), site.user_dn("kim").lower()}


@pytest.mark.parametrize("value", HOSTILE)
def test_an_escaped_dn_addresses_exactly_one_entry_on_a_real_server(site: Site, value: str) -> None:
    """The DN builder itself, against slapd: whatever the value, it names one new entry below the
    users OU, which reads back with that very value, and nothing else is touched."""
    layout = Layout.from_settings(site.settings.ldap) if site.settings.ldap else None
    assert layout is not None
    staff = f"ou=staff,{site.base_dn}"
    with site.admin() as c:
        assert c.add(site.users_dn, ["organizationalUnit"], {"ou": "people"})[0]
        assert c.add(staff, ["organizationalUnit"], {"ou": "staff"})[0]
        assert c.add(f"uid=victim,{staff}", ["account"], {"uid": "victim"})[0]
        before = site.dns()
        dn = layout.user_dn(value)
        ok, result, _, _ = c.add(dn, ["account"], {"uid": value, "description": value})
        assert ok, result
        _, _, found, _ = c.search(dn, "(objectClass=*)", BASE, attributes=["uid", "description"])
        _, _, level, _ = c.search(site.users_dn, "(objectClass=*)", LEVEL, attributes=["uid"])
    assert len(found) == 1 and found[0]["attributes"]["uid"] == [value]
    assert found[0]["attributes"]["description"] == [value]
    assert dnlib.normalize(found[0]["dn"]) == dnlib.normalize(dn)
    assert dnlib.parse_dn(found[0]["dn"])[0] == (("uid", value),)
    assert dnlib.is_under(dnlib.normalize(found[0]["dn"]), dnlib.normalize(site.users_dn))
    assert [e["attributes"]["uid"] for e in level] == [[value]]
    assert site.dns() == before | {found[0]["dn"].lower()}


def test_special_characters_in_values_round_trip_exactly(site: Site) -> None:
    display = 'Kim "K" (admin), x=y+z <a> #1; back\\slash *'
    site.add_user("kim", display_name=display, given_name="*)(uid=*", family_name="Wexler, Jr.")
    site.add_group("physics", description='(cn=*) & <everything>; "quoted" \\ #', members=["kim"])
    site.converge()
    kim = site.entry(site.user_dn("kim"))
    assert kim is not None
    assert kim["cn"] == [display] and kim["gecos"] == [display]
    assert kim["givenName"] == ["*)(uid=*"] and kim["sn"] == ["Wexler, Jr."]
    physics = site.entry(site.group_dn("physics"))
    assert physics is not None and physics["description"] == ['(cn=*) & <everything>; "quoted" \\ #']
    with pytest.raises(ValidationError, match="control characters"):
        UserCreate(username="kim2", display_name="nul\x00byte")


def test_settings_with_a_malformed_dn_are_refused_before_anything_runs(slapd: SlapdServer) -> None:
    base = slapd.new_base()
    for bad in (
        {"base_dn": "ou=x,,dc=sup"},
        {"users_dn": "ou=people,dc=elsewhere"},
        {"groups_dn": f"ou=people,{base}"},
        {"sudoers_dn": f"ou=sudo,ou=people,{base}"},
    ):
        with pytest.raises(ValidationError):
            Settings(ldap={**slapd.ldap_settings(base), **bad})
