"""When this replica's tunnels last used each login pod, for SUP's idle clock (docs/ssh-gateway.md,
"Scale to zero").

A pod may sleep only after `idle_seconds` in which no tunnel to it was opened or held. The heartbeat's
`sessions` are what is open at that instant: a short command between two heartbeats is in none of
them, and a tunnel's close is in none at all. So each tunnel's open and close is noted here, per pod,
and the heartbeat carries `used`: for a pod held now, the heartbeat's own time; otherwise the latest
open or close since the last heartbeat SUP accepted. SUP moves the pod's `last_activity` to it. An
open is also told to SUP at once (`in_use`, before the relay starts), so that a pass between the open
and the next heartbeat cannot put the pod to sleep under the session just opened.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sup.domain.login_pods import PodRoute
from sup.gateway.routes import GatewayApi, SupUnavailable

log = logging.getLogger(__name__)

Pod = tuple[str, str]  # (kind, owner), as the heartbeat names a pod
USED_TIMEOUT = 2.0  # seconds a tunnel open waits for SUP to stamp the pod, then goes on


class Activity:
    """Per pod, the latest tunnel open or close not yet in a heartbeat SUP accepted."""

    def __init__(self) -> None:
        self._used: dict[Pod, datetime] = {}

    def note(self, pod: Pod, at: datetime) -> None:
        """A tunnel to `pod` opened or closed at `at`."""
        known = self._used.get(pod)
        if known is None or at > known:
            self._used[pod] = at

    def report(self, held: Iterable[Pod], now: datetime) -> dict[Pod, datetime]:
        """What the next heartbeat says: the pods noted, and those held now at `now`."""
        report = dict(self._used)
        report.update(dict.fromkeys(held, now))
        return report

    def delivered(self, report: dict[Pod, datetime]) -> None:
        """SUP accepted `report`: forget what it covered; an open or close after it stays for the
        next heartbeat (a heartbeat that failed forgets nothing)."""
        for pod, at in report.items():
            known = self._used.get(pod)
            if known is not None and known <= at:
                del self._used[pod]


def used_body(report: dict[Pod, datetime]) -> list[dict[str, Any]]:
    """The heartbeat's `used`."""
    return [
        {"kind": kind, "name": owner, "at": at.isoformat().replace("+00:00", "Z")}
        for (kind, owner), at in sorted(report.items())
    ]


async def in_use(api: GatewayApi, pod: PodRoute) -> bool:
    """Tell SUP a tunnel opens to `pod`, which the route called awake. False: SUP says it is asleep
    (put to sleep since the route was read): wake it. SUP unreachable or slower than USED_TIMEOUT:
    go on as the route said (the next heartbeat carries the open)."""
    try:
        return await asyncio.wait_for(api.used(pod), USED_TIMEOUT)
    except (SupUnavailable, TimeoutError) as exc:
        log.warning("use of %s %s not told to SUP: %s", pod.kind, pod.owner, exc or "timeout")
        return True
