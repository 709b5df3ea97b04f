"""An in-memory target for planner tests: usernames to uids (and who is locked), with switchable faults.

Only for testing the planner's orchestration; every real target is tested against its real server.
It is a target of its own, `fake`: `FakeSettings` are SUP's settings with a `fake` section (present:
enabled), and `fake_spec(target)` is the spec that opens that very target; pass it to run_pass or the
Reconciler as `specs=[...]`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

from sup.common.sections import Section
from sup.config import Settings
from sup.domain.desired import DesiredState
from sup.targets.base import (
    CREATE,
    DELETE,
    UPDATE,
    ApplyReport,
    Change,
    Failure,
    ObserveError,
    Scope,
    TargetError,
    UntypedChange,
)
from sup.targets.spec import TargetContext, TargetSpec


class FakeSection(Section):
    """The fake target's settings: none; an empty section (`fake={}`) enables it."""


def _not_here(context: TargetContext[FakeSection]) -> Any:
    return _down("fake")


FAKE = TargetSpec(name="fake", settings_model=FakeSection, open=_not_here)


def fake_settings(*names: str) -> type[Settings]:
    """SUP's settings with an (optional) fake section for each of `names`."""
    return Settings.with_targets([replace(FAKE, name=name) for name in names])


FakeSettings = fake_settings("fake")


def fake_spec(
    target: FakeTarget | None, name: str = "fake", *, scoping: bool = False
) -> TargetSpec[FakeSection]:
    """The fake spec opening `target` (None: a target that is down, TargetError `NAME is down`).
    `scoping`: a pass after writes may read and plan only the scope's users, as the real targets do."""
    if target is None:
        return replace(FAKE, name=name, open=lambda context: _down(name))
    can_scope = (lambda section, scope, desired: True) if scoping else None
    return replace(FAKE, name=name, open=lambda context: target, can_scope=can_scope)


def _down(name: str) -> Any:
    raise TargetError(f"{name} is down")


class FakeTarget:
    name: ClassVar[str] = "fake"

    def __init__(
        self,
        system: dict[str, int],
        *,
        fail_observe: bool = False,
        fail_user: str | None = None,
        journal: list[str] | None = None,
        apply_delay: float = 0.0,
        label: str = "fake",
    ) -> None:
        self.system = system
        self.journal = journal  # shared by several fakes: "NAME ACTION USER" of each write, in order
        self.apply_delay = apply_delay  # seconds apply waits first (a slow server)
        self.label = label  # its name in the journal
        self.locked: set[str] = set()
        self.fail_observe = fail_observe
        self.fail_user = fail_user
        self.broken = False  # observe raises a terminal TargetError (as a broken template would)
        self.writes = 0
        self.closed = False

    def observe(self, scope: Scope | None = None) -> tuple[dict[str, int], set[str]]:
        if self.fail_observe:
            raise ObserveError("the fake server returned a partial result")
        if self.broken:
            raise TargetError("the fake target's template is broken", terminal=True)
        if scope is not None:  # the scope's users only, as a scoped read of a real target
            return {n: u for n, u in self.system.items() if n in scope.users}, self.locked & scope.users
        return dict(self.system), set(self.locked)

    def diff(
        self, desired: DesiredState, observed: tuple[dict[str, int], set[str]], scope: Scope | None = None
    ) -> list[UntypedChange]:
        uids, locked = observed
        changes: list[UntypedChange] = []
        if scope is not None:
            desired = replace(desired, users={n: u for n, u in desired.users.items() if n in scope.users})
        for name, user in sorted(desired.users.items()):
            if name not in uids and name in desired.identity_pending:
                continue  # as a target that needs a POSIX identity: nothing new before it exists
            if name not in uids:
                created: dict[str, Any] = {"uid": user.uid_number, "locked": not user.active}
                changes.append(Change(self.name, CREATE, "user", name, created, subject=name))
            elif uids[name] != user.uid_number or (name in locked) == user.active:
                details: dict[str, Any] = {
                    "uid": {"old": uids[name], "new": user.uid_number},
                    "locked": {"old": name in locked, "new": not user.active},
                }
                changes.append(Change(self.name, UPDATE, "user", name, details, subject=name))
        for name in sorted(set(uids) - set(desired.users)):
            changes.append(Change(self.name, DELETE, "user", name, {}, subject=name))
        return changes

    def apply(self, changes: Sequence[UntypedChange]) -> ApplyReport:
        report = ApplyReport()
        time.sleep(self.apply_delay)
        for change in changes:
            if change.name == self.fail_user:
                report.failed.append(Failure(change, "the fake server said no"))
                continue
            self.writes += 1
            if self.journal is not None:
                self.journal.append(f"{self.label} {change.action} {change.name}")
            if change.action == DELETE:
                del self.system[change.name]
                self.locked.discard(change.name)
            elif change.action == CREATE:
                self.system[change.name] = change.details["uid"]
                self._lock(change.name, change.details["locked"])
            else:
                self.system[change.name] = change.details["uid"]["new"]
                self._lock(change.name, change.details["locked"]["new"])
            report.applied.append(change)
        return report

    def _lock(self, name: str, locked: bool) -> None:
        if locked:
            self.locked.add(name)
        else:
            self.locked.discard(name)

    def close(self) -> None:
        self.closed = True
