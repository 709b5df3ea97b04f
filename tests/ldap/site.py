"""A site for LDAP tests: a store (SQLite), SUP settings pointing at a fresh base DN of a real slapd,
and the operations a test needs (tests/support/site.py): change the store, plan and reconcile, and
here: look at the directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ldap3 import BASE, SUBTREE
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.targets.ldap import LdapTarget
from sup.targets.spec import TargetContext
from tests.support.ds389 import Ds389Server
from tests.support.site import TargetSite
from tests.support.slapd import SlapdServer

# The directory servers the tests run: OpenLDAP's slapd and 389 Directory Server (same helpers).
LdapServer = SlapdServer | Ds389Server


@dataclass
class Site(TargetSite[LdapTarget]):
    target: ClassVar[str] = "ldap"
    slapd: LdapServer  # either server, despite the name
    base_dn: str
    settings: Settings
    sessions: sessionmaker[Session]
    targets: list[LdapTarget] = field(default_factory=list)

    def open_target(self, context: TargetContext[Any]) -> LdapTarget:
        return LdapTarget(context)

    def writes_of(self, target: LdapTarget) -> int:
        return target.connection.writes

    @property
    def users_dn(self) -> str:
        return f"ou=people,{self.base_dn}"

    @property
    def groups_dn(self) -> str:
        return f"ou=groups,{self.base_dn}"

    @property
    def sudoers_dn(self) -> str:
        return f"ou=SUDOers,{self.base_dn}"

    def user_dn(self, name: str) -> str:
        return f"uid={name},{self.users_dn}"

    def group_dn(self, name: str) -> str:
        return f"cn={name},{self.groups_dn}"

    # --- the directory -------------------------------------------------------------------------------

    def entry(self, dn: str) -> dict[str, list[str]] | None:
        """An entry's attributes (names as the server spells them, values as text), or None."""
        with self.slapd.admin() as c:
            _, result, response, _ = c.search(dn, "(objectClass=*)", BASE, attributes=["*", "memberOf"])
        if result["result"] == 32:
            return None
        assert result["result"] == 0, result
        return {k: [_text(v) for v in vs] for k, vs in response[0]["raw_attributes"].items()}

    def dns(self, base: str | None = None) -> set[str]:
        """Every DN below (and including) `base` (default: the site's base), lower-cased."""
        return set(self.entries(base, attributes=["1.1"]))

    def entries(
        self, base: str | None = None, attributes: list[str] | None = None
    ) -> dict[str, dict[str, list[str]]]:
        """Every entry below (and including) `base` (default: the site's base), by lower-cased DN,
        with every attribute including the operational ones (entryCSN, modifyTimestamp: they change
        with every write), or the attributes asked for."""
        with self.slapd.admin() as c:
            _, result, response, _ = c.search(
                base or self.base_dn, "(objectClass=*)", SUBTREE, attributes=attributes or ["*", "+"]
            )
        if result["result"] == 32:
            return {}
        assert result["result"] == 0, result
        return {
            r["dn"].lower(): {k: [_text(v) for v in vs] for k, vs in r["raw_attributes"].items()}
            for r in response
        }

    def admin(self) -> Any:
        return self.slapd.admin()


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")
