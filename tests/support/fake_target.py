"""An in-memory target for planner tests: a dict of usernames to uids, with switchable faults.

Only for testing the planner's orchestration; every real target is tested against its real server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from sup.domain.desired import DesiredState
from sup.targets.base import CREATE, DELETE, UPDATE, ApplyReport, Change, Failure, ObserveError


class FakeTarget:
    name: ClassVar[str] = "ldap"

    def __init__(
        self, system: dict[str, int], *, fail_observe: bool = False, fail_user: str | None = None
    ) -> None:
        self.system = system
        self.fail_observe = fail_observe
        self.fail_user = fail_user
        self.writes = 0
        self.closed = False

    def observe(self) -> dict[str, int]:
        if self.fail_observe:
            raise ObserveError("the fake server returned a partial result")
        return dict(self.system)

    def diff(self, desired: DesiredState, observed: dict[str, int]) -> list[Change]:
        changes = []
        for name, user in sorted(desired.users.items()):
            if name not in observed:
                changes.append(Change("ldap", CREATE, "user", name, {"uid": user.uid_number}, subject=name))
            elif observed[name] != user.uid_number:
                details = {"uid": {"old": observed[name], "new": user.uid_number}}
                changes.append(Change("ldap", UPDATE, "user", name, details, subject=name))
        for name in sorted(set(observed) - set(desired.users)):
            changes.append(Change("ldap", DELETE, "user", name, subject=name))
        return changes

    def apply(self, changes: Sequence[Change]) -> ApplyReport:
        report = ApplyReport()
        for change in changes:
            if change.name == self.fail_user:
                report.failed.append(Failure(change, "the fake server said no"))
                continue
            self.writes += 1
            if change.action == DELETE:
                del self.system[change.name]
            elif change.action == CREATE:
                self.system[change.name] = change.details["uid"]
            else:
                self.system[change.name] = change.details["uid"]["new"]
            report.applied.append(change)
        return report

    def close(self) -> None:
        self.closed = True
