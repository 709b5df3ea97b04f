"""A site for LDAP tests: a store (SQLite), SUP settings pointing at a fresh base DN of a real slapd,
and the operations a test needs: change the store, plan and reconcile, look at the directory."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ldap3 import BASE, SUBTREE
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.reconcile.planner import Pass, run_pass
from sup.targets.base import Target
from sup.targets.ldap import LdapTarget
from sup.targets.spec import TargetContext
from tests.support.cli import sup_env
from tests.support.slapd import SlapdServer
from tests.support.store_edits import StoreEdits


@dataclass
class Site(StoreEdits):
    slapd: SlapdServer
    base_dn: str
    settings: Settings
    sessions: sessionmaker[Session]
    targets: list[LdapTarget] = field(default_factory=list)

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

    # --- the store -----------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """The environment that gives the `sup` command this site's settings."""
        assert self.settings.ldap is not None
        ldap = self.settings.ldap.model_dump(by_alias=True, exclude_none=True)
        ldap["bind_password"] = self.settings.ldap.bind_password.get_secret_value()
        variables = {"SUP_DATABASE_URL": self.settings.database_url}
        for key, value in ldap.items():
            text = json.dumps(value) if isinstance(value, list | bool) else str(value)
            variables[f"SUP_LDAP__{key.upper()}"] = text
        return sup_env(**variables)

    # --- passes --------------------------------------------------------------------------------------

    def _open(self, name: str, context: TargetContext[Any]) -> Target[Any]:
        target = LdapTarget(context)
        self.targets.append(target)
        return target

    def plan(self) -> Pass:
        return run_pass(self.settings, self.sessions, only=["ldap"], opener=self._open)

    def reconcile(self, *, force: bool = False) -> Pass:
        return run_pass(
            self.settings, self.sessions, only=["ldap"], apply=True, force=force, opener=self._open
        )

    @property
    def last_writes(self) -> int:
        """How many writes the last pass sent to the server."""
        return self.targets[-1].connection.writes

    def converge(self) -> Pass:
        """Reconcile, and check that the pass after it has nothing left to do and writes nothing."""
        result = self.reconcile()
        assert result.ok, [(t.state, t.error, t.failed) for t in result.targets]
        again = self.reconcile()
        assert again.changes == [], [c.as_json() for c in again.changes]
        assert self.last_writes == 0
        return result

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
        with self.slapd.admin() as c:
            _, result, response, _ = c.search(
                base or self.base_dn, "(objectClass=*)", SUBTREE, attributes=["1.1"]
            )
        if result["result"] == 32:
            return set()
        assert result["result"] == 0, result
        return {r["dn"].lower() for r in response}

    def admin(self) -> Any:
        return self.slapd.admin()


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")
