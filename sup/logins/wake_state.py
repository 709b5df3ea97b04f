"""The login pods' wake state and the gateway replicas' heartbeats, in the store.

In the store rather than in a process: `sup serve --workers N` and several replicas answer the
gateway's calls, and the reconciler that decides about sleep runs in one of them. A login pod
(`Route`: a user's own or a group's) is asleep when its `login_wake` row says so; a pod without a row
is awake (the scheduled pass makes its row on first sight, sleep.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from sup.domain.login_pods import Route
from sup.domain.login_sleep import STALE_AFTER, Heartbeat, PodState
from sup.store.models import GatewayHeartbeat, LoginWake
from sup.store.session import is_postgresql

FORGET_AFTER = 20  # heartbeat intervals after which a silent replica's row is deleted


def _route(row: LoginWake) -> Route:
    return Route("group" if row.kind == "group" else "user", row.name)


def asleep(session: Session) -> frozenset[Route]:
    """The login pods that sleep (their StatefulSets are rendered with replicas 0)."""
    rows = session.scalars(select(LoginWake).where(LoginWake.awake.is_(False)))
    return frozenset(_route(row) for row in rows)


def awake_idle_since(session: Session, cutoff: datetime) -> list[Route]:
    """The awake pods last seen in use before `cutoff` (or never): the ones that may sleep soon."""
    query = (
        select(LoginWake)
        .where(LoginWake.awake.is_(True))
        .where(or_(LoginWake.last_activity.is_(None), LoginWake.last_activity < cutoff))
        .order_by(LoginWake.kind, LoginWake.name)
    )
    return [_route(row) for row in session.scalars(query)]


def is_awake(session: Session, pod: Route) -> bool:
    row = session.get(LoginWake, (pod.kind, pod.name))
    return row is None or row.awake


def _locked(session: Session, pods: Iterable[Route] | None = None) -> list[LoginWake]:
    """Rows (all, or those of `pods`), locked for this transaction on PostgreSQL: a wake and the
    sleep step that both change one row are serialized (SQLite serializes writers anyway)."""
    query = select(LoginWake).order_by(LoginWake.kind, LoginWake.name)  # one lock order for all
    if pods is not None:
        wanted = list(pods)
        if not wanted:
            return []
        query = query.where(
            LoginWake.kind.in_({p.kind for p in wanted}), LoginWake.name.in_({p.name for p in wanted})
        )
    if is_postgresql(session):
        query = query.with_for_update()
    return list(session.scalars(query))


def wake(session: Session, pod: Route, now: datetime) -> bool:
    """Mark `pod` awake and in use now. True if it was asleep (the caller scales it up)."""
    rows = [r for r in _locked(session, [pod]) if _route(r) == pod]
    if not rows:  # no row: awake (never seen asleep); two first wakes at once may both get here
        try:
            with session.begin_nested():
                session.add(
                    LoginWake(kind=pod.kind, name=pod.name, awake=True, woken_at=now, last_activity=now)
                )
            return False
        except IntegrityError:  # the other one made it first: stamp theirs
            rows = [r for r in _locked(session, [pod]) if _route(r) == pod]
    row = rows[0]
    was_asleep = not row.awake
    if was_asleep:
        row.awake, row.woken_at = True, now
    row.last_activity = now
    return was_asleep


def touch(session: Session, pod: Route, now: datetime) -> bool:
    """A tunnel opens to `pod`, which the gateway's route called awake: in use now. False when the
    row says asleep (a sleep committed since the route was read; the gateway wakes it then). A pod
    without a row is awake and gets none here (the pass makes rows, for pods SUP keeps)."""
    rows = [r for r in _locked(session, [pod]) if _route(r) == pod]
    if not rows:
        return True
    row = rows[0]
    if not row.awake:
        return False
    if row.last_activity is None or row.last_activity < now:
        row.last_activity = now
    return True


def stamp_used(session: Session, used: Iterable[tuple[Route, datetime]], now: datetime) -> None:
    """A heartbeat's `used`: each awake pod's last_activity moves to when a tunnel of that replica
    last opened, closed or was held (never back, never past SUP's own clock: a gateway whose clock
    runs ahead cannot keep pods up). An asleep pod stays asleep: only a wake wakes. The rows are
    locked as the sleep step locks them (`_locked`: the database's order), so the two never deadlock."""
    latest: dict[Route, datetime] = {}
    for pod, at in used:
        at = min(at, now)
        latest[pod] = max(at, latest.get(pod, at))
    for row in _locked(session, latest):
        when = latest.get(_route(row))
        if when is not None and row.awake and (row.last_activity is None or row.last_activity < when):
            row.last_activity = when


@dataclass(frozen=True)
class LiveSession:
    """One open session a gateway replica reported."""

    gateway: str
    kind: str
    name: str
    username: str
    since: str
    source: str


def record_heartbeat(
    session: Session,
    replica: str,
    sessions: Sequence[dict[str, Any]],
    busy: Sequence[dict[str, Any]],
    now: datetime,
    heartbeat_seconds: float,
    used: Sequence[tuple[Route, datetime]] = (),
) -> None:
    """Replace `replica`'s report, stamp the pods it used (`stamp_used`); forget replicas silent for
    `FORGET_AFTER` intervals."""
    stamp_used(session, used, now)
    row = session.get(GatewayHeartbeat, replica)
    if row is None:
        session.add(GatewayHeartbeat(replica=replica, at=now, sessions=list(sessions), busy=list(busy)))
    else:
        row.at, row.sessions, row.busy = now, list(sessions), list(busy)
    cutoff = now - timedelta(seconds=FORGET_AFTER * heartbeat_seconds)
    session.execute(delete(GatewayHeartbeat).where(GatewayHeartbeat.at < cutoff))


def _live(session: Session, now: datetime, heartbeat_seconds: float) -> list[GatewayHeartbeat]:
    cutoff = now - timedelta(seconds=STALE_AFTER * heartbeat_seconds)
    query = select(GatewayHeartbeat).where(GatewayHeartbeat.at >= cutoff).order_by(GatewayHeartbeat.replica)
    return list(session.scalars(query))


def live_sessions(session: Session, now: datetime, heartbeat_seconds: float) -> list[LiveSession]:
    """Who is connected, from the heartbeats of the replicas that are not silent."""
    found = [
        LiveSession(
            gateway=beat.replica,
            kind=str(item.get("kind")),
            name=str(item.get("name")),
            username=str(item.get("username")),
            since=str(item.get("since")),
            source=str(item.get("source")),
        )
        for beat in _live(session, now, heartbeat_seconds)
        for item in beat.sessions
    ]
    return sorted(found, key=lambda s: (s.kind, s.name, s.username, s.since, s.gateway))


def heartbeats(session: Session, now: datetime, heartbeat_seconds: float) -> list[Heartbeat]:
    """The stored reports as the sleep decision reads them (stale ones included: it drops them)."""
    result = []
    for beat in session.scalars(select(GatewayHeartbeat)):
        counts: dict[Route, int] = {}
        for item in beat.sessions:
            counts[_pod(item)] = counts.get(_pod(item), 0) + 1
        busy = {_pod(item) for item in beat.busy if item.get("busy") is True}
        silent = {_pod(item) for item in beat.busy if item.get("busy") is None}
        result.append(Heartbeat(beat.replica, beat.at, counts, frozenset(busy), frozenset(silent)))
    return result


def _pod(item: Mapping[str, Any]) -> Route:
    return Route("group" if item.get("kind") == "group" else "user", str(item.get("name")))


def pod_states(session: Session) -> tuple[list[LoginWake], list[PodState]]:
    """Every row, locked (the sleep step's transaction), and the same as the decision reads them."""
    rows = _locked(session)
    return rows, [PodState(_route(r), r.awake, r.woken_at, r.last_activity) for r in rows]
