"""The scheduled pass's sleep step: which login pods go to sleep now (docs/ssh-gateway.md, "Scale to
zero"), decided by `sup.domain.login_sleep.decide` from the wake state, the gateways' heartbeats and
the clock, and written to the wake state in one transaction before the pass renders replicas from it.

Runs only when `gateway.idle_seconds` is set and the Kubernetes target is on. A login pod SUP sees
for the first time gets a row, awake and in use now: turning the setting on, or a new person, does
not stop a running pod before `idle_seconds` have passed. Rows of pods that no longer exist go.
While no gateway replica reports, nothing sleeps and the awake pods are stamped in use (`decide`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from sup.config import Settings
from sup.domain.desired import DesiredState
from sup.domain.login_pods import Route, login_pods
from sup.domain.login_sleep import IdleDecision, IdlePolicy, decide
from sup.logins import metrics, wake_state
from sup.store.audit import Actor, record
from sup.store.models import LoginWake


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
