"""The background reconciler: outbox-driven passes, schedule, backoff, lifecycle, guard, leadership.

The planner runs against an in-memory target here (tests/support/fake_target.py); the real targets
are driven by the same loop in tests/e2e.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.reconcile.leader import Lease
from sup.reconcile.planner import run_pass
from sup.reconcile.worker import Reconciler
from sup.store.models import TargetStatus, User, utcnow
from sup.store.outbox import pending
from sup.store.session import make_engine
from sup.users.schemas import UserCreate, UserPatch
from sup.users.service import create_user, update_user
from sup.users.status import status_of
from tests.conftest import ACTOR
from tests.support.fake_target import FakeSettings, FakeTarget, fake_spec


def _settings(database_url: str, **overrides: Any) -> Settings:
    reconcile = {"debounce_seconds": 0.5, "interval_seconds": 60, "max_backoff_seconds": 8, **overrides}
    return FakeSettings(database_url=database_url, fake={}, reconcile=reconcile)


def _create(sessions: sessionmaker[Session], settings: Settings, name: str, **fields: Any) -> None:
    with sessions.begin() as session:
        create_user(session, settings, ACTOR, UserCreate(username=name, **fields))


@pytest.fixture
def fake() -> FakeTarget:
    return FakeTarget({})


@pytest.fixture
def worker(database_url: str, engine: Engine, fake: FakeTarget) -> Iterator[Reconciler]:
    reconciler = Reconciler(_settings(database_url), engine, specs=[fake_spec(fake)])
    yield reconciler
    reconciler.lease.release()


def test_first_tick_leads_and_runs_a_full_pass(
    worker: Reconciler, sessions: sessionmaker[Session], fake: FakeTarget
) -> None:
    _create(sessions, worker.settings, "kim")
    result = worker.tick(now=100.0)
    assert result is not None and worker.state.role == "leader" and worker.state.last_trigger == "schedule"
    assert fake.system == {"kim": 10000}
    with sessions() as session:
        assert pending(session) == []  # a clean full pass clears the marks it covered
    assert worker.tick(now=101.0) is None  # nothing new: no pass


def test_a_write_is_provisioned_after_the_debounce(
    worker: Reconciler, sessions: sessionmaker[Session], fake: FakeTarget
) -> None:
    worker.tick(now=100.0)
    _create(sessions, worker.settings, "saul")
    assert worker.tick(now=100.1) is None  # the write is seen; waiting for the burst to end
    result = worker.tick(now=100.7)
    assert result is not None and worker.state.last_trigger == "outbox"
    assert fake.system == {"saul": 10000}


def test_failures_back_off_but_new_work_goes_at_once(
    worker: Reconciler, sessions: sessionmaker[Session], fake: FakeTarget
) -> None:
    fake.fail_observe = True
    _create(sessions, worker.settings, "kim")
    assert worker.tick(now=100.0) is not None  # the full pass fails: marks stay
    with sessions() as session:
        assert [name for kind, name, _ in pending(session) if kind == "user"] == ["kim"]
    assert worker.tick(now=100.5) is None  # unchanged outbox: wait for the backoff (2 s)
    assert worker.tick(now=102.1) is not None and worker.state.last_trigger == "retry"
    assert worker.tick(now=103.0) is None  # next backoff is 4 s
    _create(sessions, worker.settings, "saul")  # new work is not held back by the backoff
    worker.tick(now=103.1)
    assert worker.tick(now=103.7) is not None and worker.state.last_trigger == "outbox"
    fake.fail_observe = False
    assert worker.tick(now=108.0) is None  # third failure in a row: 8 s (max_backoff_seconds)
    assert worker.tick(now=111.8) is not None and worker.state.last_trigger == "retry"
    assert fake.system == {"kim": 10000, "saul": 10001}
    with sessions() as session:
        assert pending(session) == []


def test_a_terminal_error_is_not_retried_until_new_input(
    worker: Reconciler, sessions: sessionmaker[Session], fake: FakeTarget
) -> None:
    fake.broken = True
    _create(sessions, worker.settings, "kim")
    result = worker.tick(now=100.0)
    assert result is not None and not result.ok and not result.retryable
    assert result.targets[0].terminal and result.targets[0].error == "the fake target's template is broken"
    assert worker.tick(now=102.1) is None and worker.tick(now=150.0) is None  # no backoff retries
    fake.broken = False
    _create(sessions, worker.settings, "saul")  # new input: a pass at once
    worker.tick(now=150.1)
    assert worker.tick(now=150.7) is not None and worker.state.last_trigger == "outbox"
    assert fake.system == {"kim": 10000, "saul": 10001}


def test_schedule_repairs_drift_nobody_reported(
    worker: Reconciler, sessions: sessionmaker[Session], fake: FakeTarget
) -> None:
    _create(sessions, worker.settings, "kim")
    worker.tick(now=100.0)
    fake.system["kim"] = 1  # hand-made drift, no outbox mark
    assert worker.tick(now=150.0) is None
    assert worker.tick(now=160.5) is not None and worker.state.last_trigger == "schedule"
    assert fake.system == {"kim": 10000}


def test_suspension_and_reactivation_keep_the_ids(
    worker: Reconciler, sessions: sessionmaker[Session], fake: FakeTarget
) -> None:
    _create(sessions, worker.settings, "kim")
    with sessions.begin() as session:
        update_user(session, worker.settings, ACTOR, "kim", UserPatch(active=False))
        suspended = session.scalars(select(User).where(User.username == "kim")).one()
        assert suspended.suspended_at is not None
    with sessions.begin() as session:
        back = update_user(session, worker.settings, ACTOR, "kim", UserPatch(active=True))
        assert back.suspended_at is None and back.uid_number == 10000


def test_grace_period_deletes_suspended_users(
    database_url: str, engine: Engine, sessions: sessionmaker[Session], fake: FakeTarget
) -> None:
    settings = FakeSettings(database_url=database_url, fake={}, lifecycle={"delete_after_days": 30})
    worker = Reconciler(settings, engine, specs=[fake_spec(fake)])
    _create(sessions, settings, "kim", active=False)
    _create(sessions, settings, "saul", active=False)
    _create(sessions, settings, "howard")
    with sessions.begin() as session:
        old = session.scalars(select(User).where(User.username == "kim")).one()
        old.suspended_at = utcnow() - timedelta(days=31)
    try:
        worker.tick(now=100.0)
    finally:
        worker.lease.release()
    with sessions() as session:
        assert set(session.scalars(select(User.username))) == {"saul", "howard"}
    assert set(fake.system) == {"saul", "howard"}  # kim is gone from the target too


def _statuses(sessions: sessionmaker[Session]) -> dict[str, tuple[str, bool]]:
    with sessions() as session:
        return {r.username: (r.state, r.active) for r in session.scalars(select(TargetStatus))}


def test_mass_suspension_is_refused_unless_forced(
    database_url: str, sessions: sessionmaker[Session], fake: FakeTarget
) -> None:
    settings = _settings(database_url, max_suspensions=2)
    for i in range(4):
        _create(sessions, settings, f"u{i}")
    run_pass(settings, sessions, apply=True, only=["fake"], specs=[fake_spec(fake)])
    assert all(active for _, active in _statuses(sessions).values())
    with sessions.begin() as session:  # the identity provider suddenly deactivates three people
        for i in range(3):
            update_user(session, settings, ACTOR, f"u{i}", UserPatch(active=False))
    refused = run_pass(settings, sessions, apply=True, only=["fake"], specs=[fake_spec(fake)])
    assert refused.targets[0].state == "refused"
    assert "locks or removes 3 of the 4 users" in (refused.targets[0].error or "")
    forced = run_pass(settings, sessions, apply=True, only=["fake"], force=True, specs=[fake_spec(fake)])
    assert forced.targets[0].state == "applied"
    assert _statuses(sessions)["u0"] == ("in_sync", False) and _statuses(sessions)["u3"] == ("in_sync", True)
    # Once applied, the locked users are no longer "active on the target": the next pass goes through.
    assert run_pass(settings, sessions, apply=True, only=["fake"], specs=[fake_spec(fake)]).ok


@pytest.mark.postgres
def test_only_one_replica_leads_and_a_dead_leader_hands_over(
    postgres_template: str, new_postgres_database: Callable[[bool], str]
) -> None:
    url = new_postgres_database(True)
    first_engine, second_engine = make_engine(url), make_engine(url)
    first, second = Lease(first_engine), Lease(second_engine)
    try:
        assert first.try_acquire() and first.alive()
        assert not second.try_acquire()
        # The leader's connection dies (process killed, network cut): PostgreSQL frees the lock.
        assert first._connection is not None
        first._connection.invalidate()
        assert not first.alive()
        assert second.try_acquire() and second.alive()
        assert not first.try_acquire()
    finally:
        first.release()
        second.release()
        first_engine.dispose()
        second_engine.dispose()


def test_sqlite_lease_is_one_process(store_url: str) -> None:
    first, second = Lease(make_engine(store_url)), Lease(make_engine(store_url))
    try:
        assert first.try_acquire()
        assert not second.try_acquire()
        first.release()
        assert second.try_acquire()
    finally:
        first.release()
        second.release()


def test_status_is_pending_until_a_pass_decides(
    worker: Reconciler, sessions: sessionmaker[Session], fake: FakeTarget
) -> None:
    def fake_state() -> tuple[str, str | None]:
        with sessions() as session:
            target = status_of(session, worker.settings, "kim", targets=["fake"]).targets[0]
            return target.state, target.last_error

    _create(sessions, worker.settings, "kim")
    assert fake_state() == ("pending", None)
    fake.fail_observe = True
    worker.tick(now=100.0)
    assert fake_state() == ("error", "the fake server returned a partial result")  # mark kept, error shown
    with sessions.begin() as session:
        update_user(session, worker.settings, ACTOR, "kim", UserPatch(display_name="Kim"))
    assert fake_state() == ("pending", "the fake server returned a partial result")
    fake.fail_observe = False
    worker.tick(now=100.6)
    worker.tick(now=101.2)
    assert fake_state() == ("in_sync", None)


def test_a_write_in_this_process_wakes_the_reconciler_before_its_poll(
    database_url: str, engine: Engine, sessions: sessionmaker[Session], fake: FakeTarget
) -> None:
    """The poll is a minute here: within the 10 s waited, only the commit's wake-up can make the pass."""
    settings = _settings(database_url, poll_seconds=60, debounce_seconds=0.2)
    reconciler = Reconciler(settings, engine, specs=[fake_spec(fake)])
    reconciler.start()
    try:
        _wait_for(lambda: reconciler.state.last_trigger == "schedule")  # the first, full pass
        _create(sessions, settings, "ayo")
        # The state is set once the pass has returned, after the fake's write: wait for the state.
        _wait_for(lambda: reconciler.state.last_trigger == "outbox")
        assert fake.system == {"ayo": 10000}
    finally:
        reconciler.stop()


def test_only_a_committed_write_of_marks_wakes_the_reconciler(sessions: sessionmaker[Session]) -> None:
    from sup.store import outbox

    woken: list[int] = []
    stop = outbox.on_commit(lambda: woken.append(1))
    try:
        with sessions() as session:
            outbox.mark_dirty(session, "user", "kim")
            session.rollback()
            session.commit()  # nothing of the mark's transaction is left to announce
        assert woken == []
        with sessions.begin() as session:  # a transaction that wrote no mark wakes nobody
            session.execute(select(User.id)).all()
        assert woken == []
        with sessions.begin() as session:
            outbox.mark_dirty(session, "user", "kim")
        assert woken == [1]
    finally:
        stop()


def _wait_for(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not reached"
        time.sleep(0.02)
