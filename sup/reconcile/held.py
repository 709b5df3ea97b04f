"""What each target held after the passes so far, from its status rows, read only when a pass needs it.

Two readers: the guards (the users a target holds active: what a plan may lock or remove, and of how
many) and the ordering of targets (the users a provider of POSIX identity holds in sync). A full pass
reads every row of the target; a pass scoped to the users the outbox named reads their rows, since
its plan can lock, remove or wait for no one else, and for the guards one count (their shares are of
everyone). At 50,000 people that is a few rows instead of 50,000 several times over, in the path from
a write to a login. A pass that plans no change reads nothing for the guards.
"""

from __future__ import annotations

import threading
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session, sessionmaker

from sup.domain.status import SyncState
from sup.store.models import TargetStatus
from sup.targets.base import Scope

ACTIVE: ColumnElement[bool] = TargetStatus.active.is_(True)
IN_SYNC: ColumnElement[bool] = TargetStatus.state == SyncState.IN_SYNC


@dataclass(frozen=True)
class Held:
    """The users a target holds active: `users` are all of them, or in a scoped read those of the
    scope; `total` is how many it holds active in all."""

    users: frozenset[str]
    total: int
    among: frozenset[str] | None = None  # the scope's users, when the read was scoped

    def covers(self, usernames: AbstractSet[str]) -> bool:
        """Whether the read saw every one of `usernames` (a full read sees everyone)."""
        return self.among is None or usernames <= self.among


class HeldUsers:
    """One pass's reads of the status rows, each made once (the targets' threads share them)."""

    def __init__(self, sessions: sessionmaker[Session], scope: Scope | None) -> None:
        self._sessions = sessions
        self._scope = scope
        self._lock = threading.Lock()
        self._active: dict[tuple[str, bool], Held] = {}
        self._in_sync: dict[tuple[str, bool], frozenset[str]] = {}

    def active(self, target: str, *, scoped: bool) -> Held:
        """The users `target` holds active (the guards' baseline): the scope's when `scoped`, with
        the count of all of them (the guards' shares are of everyone)."""
        among = self._among(scoped)
        with self._lock:  # one read per key, whichever thread asks first
            key = (target, among is not None)
            found = self._active.get(key)
            if found is None:
                users = self._users(target, ACTIVE, among)
                total = len(users) if among is None else self._count(target, ACTIVE)
                found = self._active[key] = Held(users, total, among)
        return found

    def in_sync(self, target: str, *, scoped: bool) -> frozenset[str]:
        """The users `target` holds in sync: the scope's when `scoped`."""
        among = self._among(scoped)
        with self._lock:
            key = (target, among is not None)
            found = self._in_sync.get(key)
            if found is None:
                found = self._in_sync[key] = self._users(target, IN_SYNC, among)
        return found

    def _among(self, scoped: bool) -> frozenset[str] | None:
        return self._scope.users if scoped and self._scope is not None else None

    def _users(
        self, target: str, condition: ColumnElement[bool], among: frozenset[str] | None
    ) -> frozenset[str]:
        rows = select(TargetStatus.username).where(TargetStatus.target == target, condition)
        if among is not None:  # a scope names at most planner.MAX_SCOPED_USERS users: one IN list
            rows = rows.where(TargetStatus.username.in_(sorted(among)))
        with self._sessions() as session:
            return frozenset(session.scalars(rows))

    def _count(self, target: str, condition: ColumnElement[bool]) -> int:
        query = select(func.count()).select_from(TargetStatus).where(TargetStatus.target == target, condition)
        with self._sessions() as session:
            return int(session.scalar(query) or 0)
