"""When a login pod may sleep: the decision SUP's scheduled pass takes from the gateways' heartbeats.

docs/ssh-gateway.md, "Scale to zero". Each gateway replica reports every `heartbeat_seconds` which
pods it holds sessions to and what the idle reporter in each awake pod said (busy: the person has
processes of their own running; silent: no answer). SUP keeps per pod whether it is awake, when it
was woken and when it was last seen in use. This module is pure: from those rows, the heartbeats and
the clock it says which pods were in use (their `last_activity` moves to now) and which go to sleep.

A pod sleeps when it is awake, nothing holds it (no session in a live heartbeat, not busy, not
silent), and it was last in use `idle_seconds` ago or more. A silent reporter holds the pod like a
busy one (a crashed reporter must not cost someone their tmux), but only for `max_awake_seconds`
after the wake, when that is set. A heartbeat older than `stale_after` heartbeat intervals is
ignored: that replica is gone and its connections with it. Group pods need nothing special: a
session of any member is a session to the group's pod.

Sleep fails safe: while no replica has reported within `stale_after` intervals (no gateway runs, it
cannot reach SUP, or every replica restarts at once), SUP knows neither the open sessions nor what
the reporters say, so nothing sleeps and every awake pod counts as in use. Once a replica reports
again, a pod sleeps only after `idle_seconds` more without use: long enough for the gateway to ask
its reporter, so a tmux that kept it busy before the outage still does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sup.domain.login_pods import Route

STALE_AFTER = 3  # heartbeat intervals after which a replica's report no longer counts


@dataclass(frozen=True)
class Heartbeat:
    """One gateway replica's report: open sessions per pod, and the idle reporters' answers."""

    replica: str
    at: datetime
    sessions: Mapping[Route, int] = field(default_factory=dict)
    busy: frozenset[Route] = frozenset()
    silent: frozenset[Route] = frozenset()


@dataclass(frozen=True)
class PodState:
    """What SUP stores per login pod (user or group)."""

    pod: Route
    awake: bool
    woken_at: datetime | None
    last_activity: datetime | None


@dataclass(frozen=True)
class IdlePolicy:
    idle_seconds: float
    heartbeat_seconds: float
    max_awake_seconds: float | None = None


@dataclass(frozen=True)
class IdleDecision:
    in_use: frozenset[Route]  # last_activity becomes now
    sleep: frozenset[Route]  # awake becomes false: replicas rendered 0


def decide(
    states: Iterable[PodState], heartbeats: Iterable[Heartbeat], now: datetime, policy: IdlePolicy
) -> IdleDecision:
    live = [b for b in heartbeats if now - b.at <= timedelta(seconds=STALE_AFTER * policy.heartbeat_seconds)]
    states = list(states)
    if not live:  # no gateway reports: blind, so nothing sleeps and the awake count as in use
        return IdleDecision(in_use=frozenset(s.pod for s in states if s.awake), sleep=frozenset())
    in_use = {pod for beat in live for pod, count in beat.sessions.items() if count > 0}
    in_use |= {pod for beat in live for pod in beat.busy}
    silent = {pod for beat in live for pod in beat.silent}
    idle = timedelta(seconds=policy.idle_seconds)
    sleep = set()
    for state in states:
        if not state.awake or state.pod in in_use:
            continue
        if state.pod in silent and not _awake_too_long(state, now, policy):
            continue
        if state.last_activity is None or now - state.last_activity >= idle:
            sleep.add(state.pod)
    return IdleDecision(in_use=frozenset(in_use), sleep=frozenset(sleep))


def _awake_too_long(state: PodState, now: datetime, policy: IdlePolicy) -> bool:
    if policy.max_awake_seconds is None or state.woken_at is None:
        return False
    return now - state.woken_at >= timedelta(seconds=policy.max_awake_seconds)
