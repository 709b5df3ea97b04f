"""The scheduled pass's sleep step on SQLite and PostgreSQL: rows made on first sight, pods held by
sessions and busy reporters, idle ones put to sleep (and audited), rows of pods that are gone
dropped; the planner's desired state then names the sleeping pods."""

from __future__ import annotations

from datetime import timedelta

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.domain.desired import DesiredGroup, DesiredState, DesiredUser
from sup.domain.login_pods import Route
from sup.logins import sleep as idle
from sup.logins import wake_state as state
from sup.logins.sleep import with_sleep
from sup.store.models import AuditEntry, LoginWake, utcnow
from tests.conftest import ACTOR


def _user(name: str, uid: int, *, active: bool = True) -> DesiredUser:
    return DesiredUser(
        username=name, uid_number=uid, gid_number=uid, display_name=None, given_name=None,
        family_name=None, email=None, home_directory=f"/home/{name}", login_shell="/bin/bash",
        ssh_public_keys=(), active=active,
    )  # fmt: skip


DESIRED = DesiredState(
    users={
        "kim": _user("kim", 10000),
        "saul": _user("saul", 10001),
        "gone": _user("gone", 10002, active=False),
    },
    groups={"physics": DesiredGroup("physics", 5000, None, frozenset({"kim"}), private=False)},
)


def _rows(sessions: sessionmaker[Session]) -> dict[Route, bool]:
    with sessions() as session:
        return {Route(r.kind, r.name): r.awake for r in session.scalars(select(LoginWake))}  # type: ignore[arg-type]


def _sample(name: str, kind: str) -> float:
    """A metric's value in this process's registry (what sup serve's /metrics shows); 0 if unset."""
    return REGISTRY.get_sample_value(name, {"kind": kind}) or 0.0


def _age(sessions: sessionmaker[Session], pod: Route, hours: float) -> None:
    with sessions.begin() as session:
        row = session.get(LoginWake, (pod.kind, pod.name))
        assert row is not None
        row.last_activity = utcnow() - timedelta(hours=hours)


def test_idle_pods_sleep_and_used_ones_stay(settings: Settings, sessions: sessionmaker[Session]) -> None:
    now = utcnow()
    with sessions.begin() as session:
        session.add(LoginWake(kind="user", name="left", awake=True, last_activity=now))  # no pod any more
    with sessions.begin() as session:
        decision = idle.sleep_idle(session, settings, DESIRED, now, ACTOR)
    assert decision is not None and decision.sleep == frozenset()
    kim, saul, physics = Route("user", "kim"), Route("user", "saul"), Route("group", "physics")
    assert _rows(sessions) == {kim: True, saul: True, physics: True}  # first sight: awake

    for pod in (kim, saul, physics):
        _age(sessions, pod, hours=2)  # idle_seconds is 600
    with sessions.begin() as session:  # kim has a session; physics' reporter says busy
        beat = [{"kind": "user", "name": "kim", "username": "kim", "since": now.isoformat(), "source": "x"}]
        state.record_heartbeat(
            session, "gw-a", beat, [{"kind": "group", "name": "physics", "busy": True}], now, 15
        )
    slept_before = _sample("sup_login_pod_sleeps_total", "user")
    group_slept_before = _sample("sup_login_pod_sleeps_total", "group")
    with sessions.begin() as session:
        decision = idle.sleep_idle(session, settings, DESIRED, utcnow(), ACTOR)
    assert decision is not None and decision.sleep == {saul} and decision.in_use == {kim, physics}
    assert _rows(sessions) == {kim: True, saul: False, physics: True}
    # on sup serve's /metrics: one more user pod put to sleep; awake now, kim and physics
    assert _sample("sup_login_pod_sleeps_total", "user") == slept_before + 1
    assert _sample("sup_login_pod_sleeps_total", "group") == group_slept_before
    assert (_sample("sup_login_pods_awake", "user"), _sample("sup_login_pods_awake", "group")) == (1, 1)
    with sessions() as session:
        kim_row = session.get(LoginWake, ("user", "kim"))
        assert kim_row is not None and kim_row.last_activity is not None
        assert utcnow() - kim_row.last_activity < timedelta(hours=1)  # stamped in use
        audit = session.scalars(select(AuditEntry).where(AuditEntry.action == "sleep")).all()
    assert [(a.resource_type, a.resource_name, a.actor) for a in audit] == [("gateway", "user/saul", "test")]

    desired = with_sleep(sessions, settings, DESIRED, step=False, actor=ACTOR)
    assert desired.asleep == {saul} and desired.idle_port == 9101  # login pods run the reporter


def test_nothing_sleeps_without_idle_seconds(settings: Settings, sessions: sessionmaker[Session]) -> None:
    plain = settings.model_copy(update={"gateway": None})
    with sessions.begin() as session:
        session.add(LoginWake(kind="user", name="kim", awake=False))
    with sessions.begin() as session:
        assert idle.sleep_idle(session, plain, DESIRED, utcnow(), ACTOR) is None
    desired = with_sleep(sessions, plain, DESIRED, step=True, actor=ACTOR)
    assert desired.asleep == frozenset() and desired.idle_port is None


def test_two_first_wakes_at_once_both_succeed(
    sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second of two first wakes finds the row the first made (its own read saw none)."""
    kim = Route("user", "kim")
    earlier = utcnow() - timedelta(minutes=5)
    with sessions.begin() as session:
        assert state.wake(session, kim, earlier) is False  # no row yet: awake already
    real = state._locked
    calls: list[int] = []

    def stale_read(session: Session, pods: object = None) -> list[LoginWake]:
        calls.append(1)
        return [] if len(calls) == 1 else real(session, pods)  # type: ignore[arg-type]

    monkeypatch.setattr(state, "_locked", stale_read)
    now = utcnow()
    with sessions.begin() as session:
        assert state.wake(session, kim, now) is False
    with sessions() as session:
        row = session.get(LoginWake, ("user", "kim"))
        assert row is not None and row.awake and row.last_activity == now


def test_nothing_sleeps_while_no_gateway_reports(settings: Settings, sessions: sessionmaker[Session]) -> None:
    """No gateway replica has reported within three heartbeats (none runs, or it cannot reach SUP):
    SUP does not know who is connected or what runs in the pods, so it puts none to sleep, and
    gives each awake pod idle_seconds from the pass (its reporter is asked before they are over)."""
    with sessions.begin() as session:
        idle.sleep_idle(session, settings, DESIRED, utcnow(), ACTOR)  # first sight: rows, awake
    kim, saul, physics = Route("user", "kim"), Route("user", "saul"), Route("group", "physics")
    for replica_said in (None, timedelta(seconds=46)):  # never, then a report three intervals old
        for pod in (kim, saul, physics):
            _age(sessions, pod, hours=2)
        if replica_said is not None:
            with sessions.begin() as session:
                state.record_heartbeat(session, "gw-a", [], [], utcnow() - replica_said, 15)
        now = utcnow()
        with sessions.begin() as session:
            decision = idle.sleep_idle(session, settings, DESIRED, now, ACTOR)
        assert decision is not None and decision.sleep == frozenset()
        assert _rows(sessions) == {kim: True, saul: True, physics: True}
        with sessions() as session:
            assert {r.last_activity for r in session.scalars(select(LoginWake))} == {now}

    # a replica reports again (nobody connected, nothing running): idle pods sleep again
    for pod in (kim, saul, physics):
        _age(sessions, pod, hours=2)
    with sessions.begin() as session:
        state.record_heartbeat(session, "gw-a", [], [], utcnow(), 15)
    with sessions.begin() as session:
        decision = idle.sleep_idle(session, settings, DESIRED, utcnow(), ACTOR)
    assert decision is not None and decision.sleep == {kim, saul, physics}
    assert _rows(sessions) == {kim: False, saul: False, physics: False}
