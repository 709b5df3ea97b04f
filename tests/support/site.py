"""The generic test site: a store and SUP's settings for ONE target against its real server, and what
every target's tests do with them: change the store through the services, plan and reconcile that
target through the planner (`run_pass`), count the writes a pass sent, read the users' statuses.

A target's site (tests/<target>/site.py) subclasses `TargetSite` as a dataclass that declares the
fields (its server, the part of it the test owns, `settings`, `sessions`, `targets`), says which
target it is (`target`), how to open one (`open_target`) and how many writes one sent
(`writes_of`), and adds the looks at its server that its tests need.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, SecretStr
from sqlalchemy import select

from sup.config import Settings
from sup.reconcile.planner import Pass, run_pass
from sup.store.models import TargetStatus
from sup.targets.base import Target
from sup.targets.spec import TargetContext
from tests.support.cli import sup_env
from tests.support.store_edits import StoreEdits


class _Closable(Protocol):
    def close(self) -> None: ...


T = TypeVar("T", bound=_Closable)  # the target class of the site (LdapTarget, SlurmTarget, ...)


class TargetSite(StoreEdits, Generic[T]):
    target: ClassVar[str]  # the target's name, as `run_pass(only=...)` and the settings spell it
    targets: list[T]  # every target a pass opened, in order (the last is the last pass's)

    # --- what a target's site supplies ---------------------------------------------------------------

    def open_target(self, context: TargetContext[Any]) -> T:
        """A real target of this kind, opened with the context the planner built (its settings section,
        writer lock, clock)."""
        raise NotImplementedError

    def writes_of(self, target: T) -> int:
        """How many writes this target sent to its server."""
        raise NotImplementedError

    # --- passes --------------------------------------------------------------------------------------

    def _open(self, name: str, context: TargetContext[Any]) -> Target[Any, Any]:
        assert name == self.target, name
        target = self.open_target(context)
        self.targets.append(target)
        opened: Target[Any, Any] = target  # type: ignore[assignment]  # T is this site's Target class
        return opened

    def plan(self) -> Pass:
        return run_pass(self.settings, self.sessions, only=[self.target], opener=self._open)

    def reconcile(self, *, force: bool = False) -> Pass:
        return run_pass(
            self.settings, self.sessions, only=[self.target], apply=True, force=force, opener=self._open
        )

    @property
    def last_writes(self) -> int:
        """How many writes the last pass sent to the server."""
        return self.writes_of(self.targets[-1])

    def converge(self) -> Pass:
        """Reconcile, and check that the pass after it has nothing left to do and writes nothing."""
        result = self.reconcile()
        assert result.ok, [
            (t.state, t.error, [(f.change.name, f.error) for f in t.failed]) for t in result.targets
        ]
        again = self.reconcile()
        assert again.changes == [], [c.as_json() for c in again.changes]
        assert self.last_writes == 0
        return result

    def close(self) -> None:
        """Close every target the site's passes opened."""
        for target in self.targets:
            target.close()

    # --- the store -----------------------------------------------------------------------------------

    def statuses(self) -> dict[str, tuple[str, str | None]]:
        """This target's status of each user: username -> (state, last error)."""
        with self.sessions() as session:
            rows = session.scalars(select(TargetStatus).where(TargetStatus.target == self.target))
            return {r.username: (r.state, r.last_error) for r in rows}

    # --- settings ------------------------------------------------------------------------------------

    @property
    def section(self) -> BaseModel:
        """The target's settings section (the site's target is always enabled)."""
        section = getattr(self.settings, self.target)
        assert isinstance(section, BaseModel), f"the {self.target} target is not configured"
        return section

    def section_values(self) -> dict[str, Any]:
        """The target's settings, as they would be given (aliases, secrets in clear)."""
        values = self.section.model_dump(by_alias=True)
        for key, value in values.items():
            if isinstance(value, SecretStr):
                values[key] = value.get_secret_value()
        return values

    def with_settings(self, **changes: Any) -> Settings:
        """The site's settings with these keys of the target's section changed (the others stay).
        The site keeps its own settings; assign the result to `settings` to use it."""
        values = {**self.section_values(), **changes}
        return self.settings.model_copy(update={self.target: type(self.section).model_validate(values)})

    def env(self, **extra: str) -> dict[str, str]:
        """The environment that gives the `sup` command this site's store and target settings."""
        variables = {"SUP_DATABASE_URL": self.settings.database_url}
        for key, value in self.section_values().items():
            if value is None:
                continue
            text = json.dumps(value) if isinstance(value, list | dict | bool) else str(value)
            variables[f"SUP_{self.target.upper()}__{key.upper()}"] = text
        return sup_env(**variables, **extra)
