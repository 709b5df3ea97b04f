"""The gateway's limits, pure (a clock is passed in): which new connections are admitted, how many
tunnels one person holds, how many refusal events one source may cause.

Established connections are never dropped to admit new ones: admission is decided once, when a
connection arrives."""

from __future__ import annotations

from collections import Counter
from enum import Enum


class Verdict(Enum):
    ADMIT = "admit"
    BUSY = "busy"  # key exchange, then a disconnect with "gateway busy" the client prints
    DROP = "drop"  # above twice the limit: closed without a handshake (no CPU for key exchange)


class Admission:
    """`max_connections` open connections and `max_new_per_second` new ones (a token bucket of that
    rate and as many tokens). Busy connections count as open until they close, so a flood beyond twice
    the limit is dropped cheaply."""

    def __init__(self, max_connections: int, max_new_per_second: float, now: float) -> None:
        self.max_connections = max_connections
        self.rate = max_new_per_second
        self.open = 0
        self._tokens = max_new_per_second
        self._stamp = now

    def arrive(self, now: float) -> Verdict:
        """A connection arrives; unless DROP, the caller calls `leave` when it closes."""
        if self.open >= 2 * self.max_connections:
            return Verdict.DROP
        self.open += 1
        self._tokens = min(self.rate, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        if self.open > self.max_connections or self._tokens < 1:
            return Verdict.BUSY
        self._tokens -= 1
        return Verdict.ADMIT

    def leave(self) -> None:
        self.open = max(0, self.open - 1)


class SessionCounts:
    """Tunnels held per person (`max_sessions_per_person`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: Counter[str] = Counter()

    def acquire(self, username: str) -> bool:
        if self._held[username] >= self.limit:
            return False
        self._held[username] += 1
        return True

    def release(self, username: str) -> None:
        self._held[username] -= 1
        if self._held[username] <= 0:
            del self._held[username]

    def held(self, username: str) -> int:
        return self._held[username]


class EventBudget:
    """At most `per_minute` refusal events per source address and minute: a scan must not flood SUP's
    audit log (the refusal metrics still count every one)."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._minute = -1
        self._spent: Counter[str] = Counter()

    def allow(self, source_host: str, now: float) -> bool:
        minute = int(now // 60)
        if minute != self._minute:
            self._minute = minute
            self._spent.clear()
        if self._spent[source_host] >= self.per_minute:
            return False
        self._spent[source_host] += 1
        return True
