"""The LDAP target holds to the target contract (tests/support/target_contract.py), on both
directory shapes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from ldap3 import MODIFY_DELETE, MODIFY_REPLACE

from tests.ldap.site import LdapServer, Site
from tests.support.slapd import LIMITED_DN, LIMITED_PASSWORD, LIMITED_SIZE
from tests.support.target_contract import TargetContract

DRIFTED_SHELL = "/bin/sh"


class TestLdapContract(TargetContract[Site]):
    read_error = ("sizeLimitExceeded (4)", "partial read")

    @pytest.fixture
    def site(self, make_site: Callable[..., Site], any_directory: LdapServer) -> Site:
        return make_site(any_directory)

    def holds(self, site: Site, username: str) -> bool:
        return site.entry(site.user_dn(username)) is not None

    def snapshot(self, site: Site) -> object:
        return site.entries()

    def make_drift(self, site: Site) -> set[tuple[str, str, str]]:
        if site.slapd.schema == "rfc2307":
            member = {"memberUid": [(MODIFY_DELETE, ["saul"])]}
        else:
            member = {"member": [(MODIFY_DELETE, [site.user_dn("saul")])]}
        with site.admin() as c:
            assert c.modify(site.user_dn("kim"), {"loginShell": [(MODIFY_REPLACE, [DRIFTED_SHELL])]})[0]
            assert c.modify(site.group_dn("physics"), member)[0]
        return {("update", "user", "kim"), ("add_members", "group", "physics")}

    def drift_repaired(self, site: Site) -> bool:
        kim, physics = site.entry(site.user_dn("kim")), site.entry(site.group_dn("physics"))
        assert kim is not None and physics is not None
        members = physics.get("memberUid", []) + [m.lower() for m in physics.get("member", [])]
        saul = "saul" if site.slapd.schema == "rfc2307" else site.user_dn("saul").lower()
        return kim["loginShell"] == ["/bin/bash"] and saul in members

    def add_foreign(self, site: Site) -> None:
        """Entries outside SUP's OUs, one of them a POSIX account."""
        staff = f"ou=staff,{site.base_dn}"
        account = {"uid": "legacy", "cn": "legacy", "sn": "legacy", "uidNumber": 30000, "gidNumber": 100,
                   "homeDirectory": "/home/legacy"}  # fmt: skip
        with site.admin() as c:
            assert c.add(staff, ["organizationalUnit"], {"ou": "staff"})[0]
            assert c.add(f"cn=printer,{staff}", ["device"], {"cn": "printer"})[0]
            assert c.add(f"uid=legacy,{staff}", ["inetOrgPerson", "posixAccount"], account)[0]

    def foreign(self, site: Site) -> object:
        return site.entries(f"ou=staff,{site.base_dn}")

    def break_read(self, site: Site) -> None:
        """More entries under ou=people than the size limit of the account SUP now binds as: the
        paged read stops with sizeLimitExceeded."""
        with site.admin() as c:
            for i in range(LIMITED_SIZE):
                attributes = {"uid": f"filler{i}", "cn": "f", "sn": "f", "uidNumber": 31000 + i,
                              "gidNumber": 100, "homeDirectory": "/nonexistent"}  # fmt: skip
                classes = ["inetOrgPerson", "posixAccount"]
                assert c.add(f"uid=filler{i},{site.users_dn}", classes, attributes)[0]
        site.settings = site.with_settings(bind_dn=LIMITED_DN, bind_password=LIMITED_PASSWORD)
