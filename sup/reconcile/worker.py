"""The reconciler `sup serve` runs in the background: outbox-driven passes within seconds of a write,
a full pass on a schedule, retries with backoff, and leader election between replicas.

One loop, every `reconcile.poll_seconds`, and at once when this process commits outbox marks
(outbox.on_commit: a write through this process's API wakes it; other processes' writes wait for
the poll):
- not the leader: try for the lease every `leader_retry_seconds` (standby replicas wait here);
- new work in the outbox (its content changed since the last pass): a pass, once the writes have
  been quiet for `debounce_seconds` so a burst becomes one pass;
- the last pass failed somewhere and nothing new came in: retry after a backoff that doubles up to
  `max_backoff_seconds` (a target that is down is not hammered; the others still get new work at once),
  unless every failure was terminal (TargetError(terminal=True): a broken template, a missing
  kubeconfig), which only new input or the schedule can change;
- every `interval_seconds`: the lifecycle step (expired suspensions), then a full pass that also
  repairs drift nobody reported.
Every pass is a level-triggered pass over all targets (see planner.run_pass), so a mark that was
missed, or a process killed mid-pass, only delays convergence: the next pass redoes what is left. A
pass after writes lets a target that can read only what the outbox named do so (the Kubernetes
target: a few GETs instead of listing every user's objects); retries and scheduled passes read all.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from sup.common import memory
from sup.config import Settings
from sup.reconcile import metrics
from sup.reconcile.desired_cache import DesiredCache
from sup.reconcile.leader import Lease
from sup.reconcile.lifecycle import expire_suspended
from sup.reconcile.planner import Pass, TargetOpener, run_pass
from sup.reconcile.steps import STEPS, DesiredStep
from sup.store import outbox
from sup.store.locks import LockTimeout, exclusive
from sup.store.models import OutboxMark, utcnow
from sup.store.session import make_sessionmaker
from sup.targets.registry import SPECS
from sup.targets.spec import TargetSpec

log = logging.getLogger(__name__)


@dataclass
class WorkerState:
    """What /readyz shows about the reconciler."""

    role: str = "starting"  # starting | leader | standby | stopped
    last_pass_at: float | None = None
    last_trigger: str | None = None
    targets: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "last_pass_at": self.last_pass_at,
            "last_trigger": self.last_trigger,
            "targets": self.targets,
        }


class Reconciler:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        opener: TargetOpener | None = None,
        specs: Sequence[TargetSpec[Any]] = SPECS,
        steps: Sequence[DesiredStep] = STEPS,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.opener = opener
        self.specs = specs
        self.steps = steps
        self.sessions: sessionmaker[Session] = make_sessionmaker(engine)
        self.lease = Lease(engine)
        self.state = WorkerState()
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by a commit of outbox marks, and by stop()
        self._unsubscribe: Callable[[], None] | None = None
        self._thread: threading.Thread | None = None
        self._next_full = 0.0  # a full pass right after taking the lead
        self._next_lease_try = 0.0
        self._seen: tuple[int, Any] | None = None  # outbox fingerprint the last pass covered
        self._changed_at: float | None = None
        self._failures = 0
        self._retry_at: float | None = None
        # The desired state kept between passes, so a pass after writes reloads only what they named;
        # the scheduled full pass renews it, so it is never older than two intervals.
        self.desired_cache = DesiredCache(max_age=2 * settings.reconcile.interval_seconds)

    # --- lifecycle of the thread ----------------------------------------------------------------------

    def start(self) -> None:
        self._unsubscribe = outbox.on_commit(self._wake.set)
        self._thread = threading.Thread(target=self._loop, name="sup-reconciler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30) -> None:
        self._stop.set()
        self._wake.set()
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._thread is not None:
            self._thread.join(timeout)
        self.lease.release()
        metrics.LEADER.set(0)
        self.state.role = "stopped"

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick(time.monotonic())
            except Exception:  # keep the loop alive whatever one tick did (the database may be down)
                log.exception("reconciler tick failed")
            self._wake.wait(self._pause(time.monotonic()))
            self._wake.clear()  # a commit after this is seen by the tick that follows

    def _pause(self, now: float) -> float:
        """Until the next tick: the poll, or less when a write's debounce ends sooner. A debounce
        already over (the tick could not pass: the store failed, a manual reconcile held the
        lock) waits the poll, not a busy loop."""
        rules = self.settings.reconcile
        if self._changed_at is None:
            return rules.poll_seconds
        remaining = self._changed_at + rules.debounce_seconds - now
        return remaining if 0 < remaining < rules.poll_seconds else rules.poll_seconds

    # --- one tick -------------------------------------------------------------------------------------

    def tick(self, now: float) -> Pass | None:
        """Decide whether to run a pass now, and run it. Returns the pass, if one ran."""
        if not self._lead(now):
            return None
        rules = self.settings.reconcile
        fingerprint = self._outbox()
        if fingerprint[0] and fingerprint != self._seen:
            self._changed_at = self._changed_at if self._changed_at is not None else now
        trigger = None
        if now >= self._next_full:
            trigger = "schedule"
        elif (
            self._changed_at is not None
            and fingerprint != self._seen
            and now - self._changed_at >= rules.debounce_seconds
        ):
            trigger = "outbox"
        elif self._retry_at is not None and now >= self._retry_at:
            trigger = "retry"
        if trigger is None:
            return None
        return self._pass(trigger, now, fingerprint)

    def _lead(self, now: float) -> bool:
        if self.lease.leading and self.lease.alive():
            return True
        if now < self._next_lease_try:
            return False
        self._next_lease_try = now + self.settings.reconcile.leader_retry_seconds
        if self.lease.try_acquire():
            log.info("this replica is now the active reconciler")
            self.desired_cache.clear()  # another replica's passes may have covered writes since
            self.state.role = "leader"
            metrics.LEADER.set(1)
            self._next_full = now  # a new leader starts with a full pass
            return True
        self.state.role = "standby"
        metrics.LEADER.set(0)
        # What a standby last saw as leader is stale: only the leader reports targets and the outbox.
        metrics.TARGET_UP.clear()
        metrics.LAST_PASS_CHANGES.clear()
        metrics.OUTBOX_OLDEST_AGE.set(0)
        return False

    def _outbox(self) -> tuple[int, Any]:
        with self.sessions() as session:
            count, newest, oldest = session.execute(
                select(
                    func.count(), func.max(OutboxMark.marked_at), func.min(OutboxMark.marked_at)
                ).select_from(OutboxMark)
            ).one()
        metrics.OUTBOX_DEPTH.set(count)
        metrics.OUTBOX_OLDEST_AGE.set(_age_seconds(oldest))
        return int(count), newest

    def _pass(self, trigger: str, now: float, fingerprint: tuple[int, Any]) -> Pass | None:
        rules = self.settings.reconcile
        if trigger == "schedule":
            with self.sessions.begin() as session:
                expire_suspended(session, self.settings, utcnow())
        try:
            with exclusive(self.engine, "reconcile", timeout=rules.interval_seconds):
                result = run_pass(
                    self.settings,
                    self.sessions,
                    apply=True,
                    opener=self.opener,
                    specs=self.specs,
                    steps=self.steps,
                    scoped=trigger == "outbox",  # after writes: what they named; else everything
                    cache=self.desired_cache,
                )
        except LockTimeout:
            log.warning("a manual reconcile has held the lock for too long; trying again later")
            return None
        except SQLAlchemyError as exc:
            log.error("reconcile pass could not use the store: %s", type(exc).__name__)
            self._schedule_retry(now)
            return None
        metrics.PASSES.labels(trigger).inc()
        if trigger != "outbox":
            memory.trim()  # a full pass's reads are garbage now: give their pages back
        self._seen, self._changed_at = fingerprint, None
        if trigger == "schedule":
            self._next_full = now + rules.interval_seconds
        if result.ok or not result.retryable:  # terminal errors wait for new input, not a backoff
            self._failures, self._retry_at = 0, None
        else:
            self._schedule_retry(now)
        self.state.last_pass_at = time.time()
        self.state.last_trigger = trigger
        self.state.targets = {t.target: {"state": t.state, "error": t.error} for t in result.targets}
        for t in result.targets:
            if t.error:
                terminal = " (terminal: not retried until the input changes)" if t.terminal else ""
                log.warning("reconcile %s: %s%s: %s", t.target, t.state, terminal, t.error)
        return result

    def _schedule_retry(self, now: float) -> None:
        self._failures += 1
        backoff = min(2.0**self._failures, self.settings.reconcile.max_backoff_seconds)
        self._retry_at = now + backoff


def _age_seconds(marked_at: Any) -> float:
    """Seconds since `marked_at` (naive UTC from SQLite, aware from PostgreSQL); 0 for no mark."""
    if marked_at is None:
        return 0.0
    now = utcnow()
    if marked_at.tzinfo is None:
        now = now.replace(tzinfo=None)
    return max(0.0, float((now - marked_at).total_seconds()))
