"""What each target held after the passes so far, from its status rows, read only when a pass needs it.

Two readers: the guards (the users a target holds active: what a plan may lock or remove, and of how
many) and the ordering of targets (the users a provider of POSIX identity holds in sync). A full pass
reads every row of the target; a pass scoped to the users the outbox named reads their rows and a
count, since its plan can lock, remove or wait for no one else. At 50,000 people that is a few rows
instead of 50,000 several times over, in the path from a write to a login. A pass that plans no change
reads nothing for the guards.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session, sessionmaker

from sup.domain.status import SyncState
from sup.store.models import TargetStatus
from sup.targets.base import Scope

HeldState = Literal["active", "in_sync"]


@dataclass(frozen=True)
class Held:
    """The users a target holds in some state: `users` are all of them, or in a scoped read those
    of the scope; `total` is how many it holds in that state in all."""

    users: frozenset[str]
    total: int
    among: frozenset[str] | None = None  # the scope's users, when the read was scoped

    def covers(self, usernames: frozenset[str] | set[str]) -> bool:
        """Whether the read saw every one of `usernames` (a full read sees everyone)."""
        return self.among is None or usernames <= self.among


class HeldUsers:
    """One pass's reads of the status rows, each made once (the targets' threads share them)."""

    def __init__(self, sessions: sessionmaker[Session], scope: Scope | None) -> None:
        self._sessions = sessions
        self._scope = scope
        self._lock = threading.Lock()
        self._read: dict[tuple[str, HeldState, bool], Held] = {}

    def active(self, target: str, *, scoped: bool) -> Held:
        """The users `target` holds active (the guards' baseline): the scope's when `scoped`."""
        return self._held(target, "active", scoped)

    def in_sync(self, target: str, *, scoped: bool) -> Held:
        """The users `target` holds in sync: the scope's when `scoped`."""
        return self._held(target, "in_sync", scoped)

    def _held(self, target: str, state: HeldState, scoped: bool) -> Held:
        among = self._scope.users if scoped and self._scope is not None else None
        key = (target, state, among is not None)
        with self._lock:  # one read per key, whichever thread asks first
            found = self._read.get(key)
            if found is None:
                found = self._read[key] = _read(self._sessions, target, state, among)
        return found


def _read(
    sessions: sessionmaker[Session], target: str, state: HeldState, among: frozenset[str] | None
) -> Held:
    condition: ColumnElement[bool] = (
        TargetStatus.active.is_(True) if state == "active" else TargetStatus.state == SyncState.IN_SYNC
    )
    rows = select(TargetStatus.username).where(TargetStatus.target == target, condition)
    with sessions() as session:
        if among is None:
            users = frozenset(session.scalars(rows))
            return Held(users, len(users))
        # A scope names at most planner.MAX_SCOPED_USERS users: one IN list.
        users = frozenset(session.scalars(rows.where(TargetStatus.username.in_(sorted(among)))))
        total = session.scalar(
            select(func.count()).select_from(TargetStatus).where(TargetStatus.target == target, condition)
        )
        return Held(users, int(total or 0), among)
