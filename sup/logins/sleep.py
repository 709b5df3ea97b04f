"""The sleep step: which login pods go to sleep now (docs/ssh-gateway.md, "Scale to zero"), decided
by `sup.domain.login_sleep.decide` from the wake state, the gateways' heartbeats and the clock, and
written to the wake state in one transaction before the pass renders replicas from it.

`SLEEP_STEP` is how the planner runs it: a step that adjusts the desired state before the targets
plan (sup/reconcile/steps.py lists it), with no name of this package in the planner. Its write
(`sleep_idle`) runs in full applying passes (the scheduled one, a retry, `sup reconcile`); every
pass, `sup plan` included, then plans from the pods asleep (`with_asleep`).

Runs only when `gateway.idle_seconds` is set and the Kubernetes target is on. A login pod SUP sees
for the first time gets a row, awake and in use now: turning the setting on, or a new person, does
not stop a running pod before `idle_seconds` have passed. Rows of pods that no longer exist go.
While no gateway replica reports, nothing sleeps and the awake pods are stamped in use (`decide`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.domain.desired import DesiredState
from sup.domain.login_pods import Route, login_pods
from sup.domain.login_sleep import IdleDecision, IdlePolicy, decide
from sup.logins import metrics, wake_state
from sup.store.audit import Actor, record
from sup.store.models import LoginWake, utcnow


def policy(settings: Settings) -> IdlePolicy | None:
    """The sleep policy, or None when pods never sleep (no `gateway.idle_seconds`, no Kubernetes)."""
    gateway = settings.gateway
    if gateway is None or gateway.idle_seconds is None or settings.kube is None:
        return None
    hours = gateway.max_awake_hours
    return IdlePolicy(
        idle_seconds=gateway.idle_seconds,
        heartbeat_seconds=gateway.heartbeat_seconds,
        max_awake_seconds=None if hours is None else hours * 3600,
    )


def sleep_idle(
    session: Session, settings: Settings, desired: DesiredState, now: datetime, actor: Actor
) -> IdleDecision | None:
    """Stamp the pods in use, put the idle ones to sleep (audited `gateway.sleep`). None: pods never
    sleep on this site."""
    rules = policy(settings)
    kube = settings.kube
    if rules is None or kube is None:
        return None
    pods = login_pods(desired, kube.login_groups, kube.group_pods)
    rows, states = wake_state.pod_states(session)
    known = {s.pod for s in states}
    for pod in sorted(pods - known, key=lambda p: (p.kind, p.name)):
        session.add(LoginWake(kind=pod.kind, name=pod.name, awake=True, woken_at=None, last_activity=now))
    for row in rows:
        if Route("group" if row.kind == "group" else "user", row.name) not in pods:
            session.delete(row)
    kept = [s for s in states if s.pod in pods]
    decision = decide(kept, wake_state.heartbeats(session, now, rules.heartbeat_seconds), now, rules)
    for row in rows:
        pod = Route("group" if row.kind == "group" else "user", row.name)
        if pod not in pods:
            continue
        if pod in decision.in_use:
            row.last_activity = now
        if pod in decision.sleep:
            last = row.last_activity.isoformat() if row.last_activity else None
            row.awake = False
            metrics.SLEEPS.labels(pod.kind).inc()
            record(
                session, actor, "sleep", "gateway", f"{pod.kind}/{pod.name}", after={"last_activity": last}
            )
    session.flush()
    awake = [s.pod for s in kept if s.awake and s.pod not in decision.sleep] + list(pods - known)
    for kind in ("user", "group"):
        metrics.AWAKE.labels(kind).set(sum(1 for pod in awake if pod.kind == kind))
    return decision


def with_asleep(session: Session, settings: Settings, desired: DesiredState) -> DesiredState:
    """The desired state with the pods asleep and the idle reporter's port, when pods may sleep on
    this site (`gateway.idle_seconds`); else `desired` as it is."""
    if policy(settings) is None:
        return desired
    assert settings.gateway is not None  # policy says pods may sleep
    return replace(desired, asleep=wake_state.asleep(session), idle_port=settings.gateway.idle_port)


def with_sleep(
    sessions: sessionmaker[Session], settings: Settings, desired: DesiredState, *, step: bool, actor: Actor
) -> DesiredState:
    """`with_asleep`; with `step`, idle pods are put to sleep first (`sleep_idle`), in a transaction
    of their own: what the planner does through `SLEEP_STEP`, in one call."""
    if policy(settings) is None:
        return desired
    if step:
        with sessions.begin() as session:
            SLEEP_STEP.act(session, settings, desired, utcnow(), actor)
    with sessions() as session:
        return SLEEP_STEP.adjust(session, settings, desired)


class SleepStep:
    """The sleep step as the planner runs it (the `DesiredStep` protocol of sup/reconcile/steps.py)."""

    name = "sleep"

    def runs(self, settings: Settings, targets: Collection[str]) -> bool:
        """Only when the Kubernetes target is in the pass and pods may sleep on this site."""
        return "kube" in targets and policy(settings) is not None

    def act(
        self, session: Session, settings: Settings, desired: DesiredState, now: datetime, actor: Actor
    ) -> None:
        sleep_idle(session, settings, desired, now, actor)

    def adjust(self, session: Session, settings: Settings, desired: DesiredState) -> DesiredState:
        return with_asleep(session, settings, desired)


SLEEP_STEP = SleepStep()
