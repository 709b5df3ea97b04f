"""Held tunnels whose route is gone are cut (docs/ssh-gateway.md, "Access removed while connected").

A route is asked for when a person logs in and at each tunnel open; a person suspended, removed, or
taken out of a group while a tunnel is open would otherwise keep it (and the shell in the pod behind
it) for as long as they like. Every `route_recheck_seconds` the gateway asks SUP again for the route
of each person holding a tunnel (through the route cache, at most RECHECK_CONCURRENCY at once) and
cuts a tunnel when SUP definitely says its pod is no longer theirs: a 404 naming one of SUP's
refusal reasons (the person), or a route without that pod (a group left). A lookup that fails,
times out, or answers something else cuts nothing: a SUP outage must not end sessions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sup.gateway.routes import Lookup, NoRoute, PersonRoute, SupUnavailable

log = logging.getLogger(__name__)

RECHECK_CONCURRENCY = 8  # route lookups in flight at once during a pass
NO_SUCH_POD = "no_such_pod"  # SUP's reason when the person passes but the pod is not theirs


@dataclass(eq=False)
class HeldTunnel:
    """One open tunnel: whose, to which pod (the route's name: `login` or a group's), and how to cut
    it (`cut(reason)`, reason SUP's)."""

    username: str
    pod: str
    cut: Callable[[str], None]


class RouteRecheck:
    def __init__(
        self, lookup: Callable[[str], Awaitable[Lookup]], *, concurrency: int = RECHECK_CONCURRENCY
    ) -> None:
        self._lookup = lookup
        self._concurrency = concurrency
        self._people: dict[str, set[HeldTunnel]] = {}

    def hold(self, username: str, pod: str, cut: Callable[[str], None]) -> HeldTunnel:
        held = HeldTunnel(username, pod, cut)
        self._people.setdefault(username, set()).add(held)
        return held

    def release(self, held: HeldTunnel) -> None:
        tunnels = self._people.get(held.username)
        if tunnels is None:
            return
        tunnels.discard(held)
        if not tunnels:
            del self._people[held.username]

    def people(self) -> int:
        return len(self._people)

    async def check(self) -> list[tuple[HeldTunnel, str]]:
        """One pass over the people holding tunnels; the tunnels cut, each with its reason."""
        gate = asyncio.Semaphore(self._concurrency)
        cut: list[tuple[HeldTunnel, str]] = []

        async def one(username: str) -> None:
            async with gate:
                try:
                    lookup = await self._lookup(username)
                except SupUnavailable as exc:
                    log.warning("route recheck of %s skipped, tunnels kept: %s", username, exc)
                    return
            for held, reason in gone(lookup, self._people.get(username, set())):
                cut.append((held, reason))
                held.cut(reason)  # its close releases it

        await asyncio.gather(*(one(username) for username in list(self._people)))
        return cut

    async def run(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await self.check()
            except Exception:  # a bug here must not stop the rechecks for good
                log.exception("route recheck failed")


def gone(lookup: Lookup, tunnels: set[HeldTunnel]) -> list[tuple[HeldTunnel, str]]:
    """Which of one person's tunnels `lookup` (SUP's answer now) takes away, with SUP's reason."""
    if isinstance(lookup, NoRoute):
        return [(held, lookup.reason) for held in tunnels] if lookup.definite else []
    assert isinstance(lookup, PersonRoute)
    return [(held, NO_SUCH_POD) for held in tunnels if lookup.pod(held.pod) is None]
