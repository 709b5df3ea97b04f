"""What the SSH gateway asks of SUP (docs/ssh-gateway.md): a person's route, a wake, a tunnel's use
of an awake pod, a heartbeat, an audit event; and who is connected, for people.

The answers are built from the store as the desired state and the Kubernetes target see it
(`sup.logins.person.gateway_person`, `kube.login_groups`, `kube.group_pods`), so the gateway routes
exactly to the pods the target keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from sup.config import Settings
from sup.domain.login_pods import PodRoute, Refusal, RefusalReason, Route, reachable
from sup.domain.login_sleep import STALE_AFTER
from sup.errors import NotFound
from sup.logins import metrics, sleep, wake_state
from sup.logins.person import gateway_person
from sup.store.audit import Actor, record
from sup.store.models import Group
from sup.targets.kube import Owner

_PROBE = "SHA256:probe"  # a key the routes answer does not check (the gateway checks the key itself)


@dataclass(frozen=True)
class Routes:
    username: str
    fingerprints: list[str]
    pods: list[PodRoute]


def routes(session: Session, settings: Settings, username: str) -> Routes | Refusal:
    """The person's key fingerprints and the pods they may reach (their own first), or why none.
    A pod's port is the one its Service's DNS name answers on (`KubeSettings.login_port`): sshd's
    own for a headless Service, the Service's port otherwise."""
    kube = settings.kube
    if kube is None:
        return Refusal(RefusalReason.NO_LOGIN_POD, "the Kubernetes target is off: no login pods")
    person = gateway_person(
        session, username, access_groups=settings.access.groups, login_groups=kube.login_groups
    )
    probe = replace(person, fingerprints=frozenset({_PROBE})) if person is not None else None
    access = reachable(probe, _PROBE, kube.group_pods)
    if isinstance(access, Refusal):
        return access
    assert person is not None  # reachable refuses an unknown person
    sleeps = settings.gateway is not None and settings.gateway.sleeps
    pods = [
        _pod(route, kube.namespace, kube.login_port, not sleeps or wake_state.is_awake(session, route))
        for route in access.pods
    ]
    return Routes(person.username, sorted(person.fingerprints), pods)


def awake_pods(session: Session, settings: Settings, now: datetime) -> list[PodRoute]:
    """The awake login pods whose idle reporter the gateway should ask (docs/ssh-gateway.md, "Scale
    to zero"): those that could be put to sleep within the next three heartbeats, so that a busy
    answer reaches SUP before the pass would decide. `port` is the reporter's (`gateway.idle_port`).
    Empty when pods never sleep here."""
    rules = sleep.policy(settings)
    kube, gateway = settings.kube, settings.gateway
    if rules is None or kube is None or gateway is None:
        return []
    soon = max(0.0, rules.idle_seconds - STALE_AFTER * rules.heartbeat_seconds)
    pods = wake_state.awake_idle_since(session, now - timedelta(seconds=soon))
    return [_pod(route, kube.namespace, gateway.idle_port, True) for route in pods]


def _pod(route: Route, namespace: str, port: int, awake: bool) -> PodRoute:
    owner = Owner(route.kind, route.name)
    name = "login" if route.kind == "user" else route.name
    return PodRoute(name, route.kind, route.name, owner.login, namespace, port, awake)


def pod_exists(session: Session, settings: Settings, pod: Route) -> bool:
    """Whether SUP keeps this login pod (an active person's own, or a group in kube.group_pods)."""
    kube = settings.kube
    if kube is None:
        return False
    if pod.kind == "group":
        found = session.scalar(select(Group.id).where(Group.name == pod.name))
        return pod.name in kube.group_pods and found is not None
    person = gateway_person(
        session, pod.name, access_groups=settings.access.groups, login_groups=kube.login_groups
    )
    return person is not None and person.active and person.own_pod


def wake(session: Session, settings: Settings, pod: Route, now: datetime, actor: Actor) -> bool:
    """Mark the pod awake and in use, and scale its StatefulSet to one replica at once (when pods
    sleep on this site). NotFound for a pod SUP does not keep. True if this woke it."""
    if not pod_exists(session, settings, pod):
        raise NotFound("login pod", f"{pod.kind}/{pod.name}")
    kube = settings.kube
    assert kube is not None
    was_asleep = wake_state.wake(session, pod, now)
    if settings.gateway is None or not settings.gateway.sleeps:
        return False  # pods never sleep: nothing to scale
    from sup.targets.kube import wake_login  # loads the Kubernetes client: only when waking

    wrote = wake_login(kube, pod.kind, pod.name)
    if was_asleep or wrote:
        metrics.WAKES.labels(pod.kind).inc()
        record(session, actor, "wake", "gateway", f"{pod.kind}/{pod.name}", after={"scaled": wrote})
    return was_asleep or wrote


def used(session: Session, settings: Settings, pod: Route, now: datetime) -> bool:
    """A tunnel opens to a pod the gateway was told is awake: stamp it in use now, so that a pass
    cannot put it to sleep under the session just opened. False: it is asleep (a sleep won the race;
    the gateway wakes it). Without sleep on this site pods are always awake and nothing is written."""
    if settings.gateway is None or not settings.gateway.sleeps or settings.kube is None:
        return True
    return wake_state.touch(session, pod, now)


def event(session: Session, actor: Actor, body: dict[str, Any]) -> None:
    """A login or refusal the gateway saw, into the audit log (fingerprints only, never a key)."""
    after = {k: body.get(k) for k in ("fingerprint", "source", "reason", "pod")}
    record(session, actor, str(body["event"]), "gateway", str(body["username"])[:256], after=after)
