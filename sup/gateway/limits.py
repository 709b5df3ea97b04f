"""The gateway's limits, pure (a clock is passed in): which new connections are admitted, how many
tunnels one person holds, how many refusal events one source may cause.

Established connections are never dropped to admit new ones: admission is decided once, when a
connection arrives."""

from __future__ import annotations

import ipaddress
from collections import Counter, OrderedDict
from dataclasses import dataclass
from enum import Enum

MAX_IDLE_SOURCES = 10_000  # sources with nothing open whose rate is still remembered


class Verdict(Enum):
    ADMIT = "admit"
    BUSY = "busy"  # key exchange, then a disconnect with "gateway busy" the client prints
    DROP = "drop"  # above twice the limit: closed without a handshake (no CPU for key exchange)


def source_key(host: str, ipv6_prefix: int = 64) -> str:
    """Who a connection counts against: an IPv4 address as is (an IPv4-mapped IPv6 one as its IPv4
    address), an IPv6 address by its /`ipv6_prefix` network (one host is commonly given a whole /64
    and may pick any address in it). Anything else (a Unix socket, "?") is its own key."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, ipv6_prefix), strict=False))
    return str(address)


@dataclass(frozen=True)
class SourceLimits:
    """What one source (source_key) may take of a process: connections held open, of them not yet
    authenticated, and new ones per second (a token bucket of `burst` tokens refilled at `rate`)."""

    max_connections: int
    max_unauthenticated: int
    rate: float
    burst: float


@dataclass
class _Bucket:
    tokens: float
    stamp: float

    def refill(self, rate: float, burst: float, now: float) -> None:
        self.tokens = min(burst, self.tokens + max(0.0, now - self.stamp) * rate)
        self.stamp = now


@dataclass
class _Source:
    bucket: _Bucket
    held: int = 0  # open connections, admitted or busy
    unauthenticated: int = 0  # of them, not authenticated yet


class Admission:
    """`max_connections` open connections and `max_new_per_second` new ones (a token bucket of that
    rate and as many tokens) per process, and `per_source` limits for each source address, so that
    one address (a flood, or a scan holding connections in the login grace) cannot make the gateway
    busy for everyone else. Busy connections count as open until they close, so a flood beyond twice
    a limit is dropped cheaply; a connection busy for its source takes none of the process's tokens,
    and a source that has spent its own bucket cannot take the last half of the process's.

    Bookkeeping is O(1) per call and bounded: a source is remembered while it holds connections, and
    once it holds none only until its bucket would be full again (or, past MAX_IDLE_SOURCES such
    sources, the oldest is forgotten: its bucket starts full, as for a source never seen)."""

    def __init__(
        self,
        max_connections: int,
        max_new_per_second: float,
        now: float,
        per_source: SourceLimits | None = None,
        *,
        max_idle_sources: int = MAX_IDLE_SOURCES,
    ) -> None:
        self.max_connections = max_connections
        self.rate = max_new_per_second
        self.per_source = per_source or SourceLimits(
            max_connections, max_connections, max_new_per_second, max_new_per_second
        )
        self._reserve = per_source is not None  # without per-source limits, one bucket for all
        self.open = 0
        self._bucket = _Bucket(max_new_per_second, now)
        self._sources: dict[str, _Source] = {}
        self._idle: OrderedDict[str, float] = OrderedDict()  # source -> when it held nothing
        self._max_idle = max_idle_sources

    def arrive(self, source: str, now: float) -> Verdict:
        """A connection from `source` (source_key) arrives; unless DROP, the caller calls
        `authenticated` when it authenticates and `leave` when it closes."""
        limits = self.per_source
        self._forget_idle(now)
        entry = self._sources.get(source)
        if self.open >= 2 * self.max_connections:
            return Verdict.DROP
        if entry is not None and (
            entry.held >= 2 * limits.max_connections
            or entry.unauthenticated >= 2 * limits.max_unauthenticated
        ):
            return Verdict.DROP
        if entry is None:
            entry = self._sources[source] = _Source(_Bucket(limits.burst, now))
        else:
            self._idle.pop(source, None)  # holds a connection again: remembered while it does
        self.open += 1
        entry.held += 1
        entry.unauthenticated += 1
        self._bucket.refill(self.rate, self.rate, now)
        entry.bucket.refill(limits.rate, limits.burst, now)
        if (
            entry.held > limits.max_connections
            or entry.unauthenticated > limits.max_unauthenticated
            or entry.bucket.tokens < 1
        ):
            return Verdict.BUSY  # this source's own limit: the process's tokens are not touched
        # The process's tokens: a source that has spent its own bucket (a flood) may not take the
        # last half of them; one that has spent little (a person) may take them all. Otherwise one
        # source's burst, refilled faster than the process's, keeps the process at no token.
        spent = 1 - entry.bucket.tokens / limits.burst if self._reserve else 0.0
        if self.open > self.max_connections or self._bucket.tokens - 1 < spent * self.rate / 2:
            return Verdict.BUSY
        self._bucket.tokens -= 1
        entry.bucket.tokens -= 1
        return Verdict.ADMIT

    def authenticated(self, source: str) -> None:
        """An admitted connection from `source` authenticated: it no longer counts as unauthenticated."""
        entry = self._sources.get(source)
        if entry is not None and entry.unauthenticated > 0:
            entry.unauthenticated -= 1

    def leave(self, source: str, now: float, *, authenticated: bool = False) -> None:
        """A connection that was not dropped closed (`authenticated`: after `authenticated` was called)."""
        self.open = max(0, self.open - 1)
        entry = self._sources.get(source)
        if entry is None:
            return
        entry.held = max(0, entry.held - 1)
        if not authenticated:
            entry.unauthenticated = max(0, entry.unauthenticated - 1)
        if entry.held == 0:
            self._idle[source] = now
            self._forget_idle(now)

    def held(self, source: str) -> tuple[int, int]:
        """Connections `source` holds open now, and of them not yet authenticated."""
        entry = self._sources.get(source)
        return (0, 0) if entry is None else (entry.held, entry.unauthenticated)

    def sources(self) -> int:
        """Sources remembered now (bounded: see the class)."""
        return len(self._sources)

    def _forget_idle(self, now: float) -> None:
        """Forget sources that hold nothing and whose bucket is full again (they are then the same as
        a source never seen), oldest first: O(1) amortized, each source is queued once per idle time."""
        refilled = self.per_source.burst / self.per_source.rate
        while self._idle:
            source, since = next(iter(self._idle.items()))
            if since + refilled > now and len(self._idle) <= self._max_idle:
                break
            del self._idle[source]
            del self._sources[source]


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
