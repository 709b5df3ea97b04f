"""One pass over the enabled targets: observe, diff, and (when reconciling) apply.

Failure isolation: each target is planned and applied on its own; a target that cannot be read or
written is reported and the others go on. Safety: a target whose plan deletes more objects than
`reconcile.max_deletions` is not applied unless forced (an identity provider that suddenly returns
nobody must not wipe the cluster), nor one over the budgets of removals over a time window
(sup/domain/guards.py), and a partial read never leads to a plan (see ObserveError). A forced pass
that overrode a guard is recorded in the audit log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.config.ssh_ca import plain_keys_taken
from sup.config.targets import target_context
from sup.domain.desired import DesiredState, Policy, derive
from sup.domain.guards import Spent, budget_refusal, mass_change
from sup.domain.status import PassState
from sup.reconcile import metrics
from sup.reconcile.desired_cache import DesiredCache
from sup.reconcile.held import HeldUsers
from sup.reconcile.status import record_statuses
from sup.reconcile.steps import STEPS, DesiredStep, adjusted, prepare
from sup.reconcile.targets import TargetOpener, store_lock
from sup.store import outbox, removals
from sup.store.audit import Actor, record
from sup.store.session import is_postgresql
from sup.store.snapshot import load_snapshot
from sup.targets.base import DELETE, AnyDetails, Change, Failure, ObserveError, Scope, TargetError
from sup.targets.registry import SPECS
from sup.targets.spec import TargetSpec

log = logging.getLogger(__name__)

RECONCILER = Actor(name="reconciler", role="admin")  # the audit log's actor when no one is named

__all__ = ["Pass", "TargetOpener", "TargetPass", "plan_from_session", "run_pass"]


@dataclass
class TargetPass:
    target: str
    state: PassState
    changes: list[Change[AnyDetails]] = field(default_factory=list)
    error: str | None = None
    applied: list[Change[AnyDetails]] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)
    scoped: bool = False  # read and planned only the users the outbox named (run_pass `scoped`)
    terminal: bool = False  # the error cannot go away by retrying, only when the input changes
    overridden: str | None = None  # the refusal `force` overrode
    spent: Spent = field(default_factory=Spent)  # what the applied changes took of the budgets

    def as_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "state": self.state,
            "scoped": self.scoped,
            "error": self.error,
            "changes": len(self.changes),
            "applied": len(self.applied),
            "failed": [{"change": f.change.as_json(), "error": f.error} for f in self.failed],
        }


@dataclass
class Pass:
    targets: list[TargetPass]

    @property
    def changes(self) -> list[Change[AnyDetails]]:
        return [c for t in self.targets for c in t.changes]

    @property
    def ok(self) -> bool:
        return all(
            t.state in (PassState.DISABLED, PassState.PLANNED, PassState.APPLIED) for t in self.targets
        )

    @property
    def retryable(self) -> bool:
        """Whether a target failed in a way a retry may fix (not a terminal TargetError)."""
        return any(
            t.state not in (PassState.DISABLED, PassState.PLANNED, PassState.APPLIED) and not t.terminal
            for t in self.targets
        )


def policy_of(settings: Settings) -> Policy:
    return Policy(
        nologin_shell=settings.accounts.nologin_shell,
        access_groups=frozenset(settings.access.groups),
        plain_keys_in_login_pods=plain_keys_taken(settings.ssh_ca),
    )


def desired_state(
    sessions: sessionmaker[Session], settings: Settings, cache: DesiredCache | None = None
) -> DesiredState:
    """The whole store's desired state (and, with the reconciler's `cache`, kept for its next pass)."""
    with _snapshot_session(sessions) as session:
        if cache is None:
            return derive(load_snapshot(session), policy_of(settings))
        return cache.full(session, policy_of(settings))


@contextmanager
def _snapshot_session(sessions: sessionmaker[Session]) -> Iterator[Session]:
    with sessions() as session:
        if is_postgresql(session):
            # The snapshot is several queries: they must see one moment, or a user created between
            # two of them shows up as a member nobody knows.
            session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        yield session


def _load_desired(
    sessions: sessionmaker[Session],
    settings: Settings,
    enabled: Sequence[TargetSpec[Any]],
    scope: Scope | None,
    cache: DesiredCache | None,
) -> DesiredState:
    """The desired state a pass plans from: in a scoped pass with a cache, the kept one with what
    the scope can have changed reloaded, when every target will plan only the scope from it; a
    target that reads everything plans from everything (the kept state is current for the scope
    only, not for what other processes' passes may have covered)."""
    if not enabled:
        return DesiredState()  # no target to read: the store need not be either
    if scope is not None and cache is not None:
        with _snapshot_session(sessions) as session:
            patched = cache.scoped(session, policy_of(settings), scope)
        if patched is not None and all(_stays_scoped(spec, settings, scope, patched) for spec in enabled):
            return patched
    return desired_state(sessions, settings, cache)


def _stays_scoped(spec: TargetSpec[Any], settings: Settings, scope: Scope, desired: DesiredState) -> bool:
    section = settings.target_settings(spec)
    if section is None:
        return True  # not configured: the pass reports it and reads nothing
    return spec.can_scope is not None and spec.can_scope(section, scope, desired)


def _selected(specs: Sequence[TargetSpec[Any]], only: Sequence[str] | None) -> list[TargetSpec[Any]]:
    if not only:
        return list(specs)
    names = [spec.name for spec in specs]
    unknown = [t for t in only if t not in names]
    if unknown:
        raise ValueError(f"unknown target(s) {', '.join(unknown)}; targets are {', '.join(names)}")
    return [spec for spec in specs if spec.name in only]


def run_pass(
    settings: Settings,
    sessions: sessionmaker[Session],
    *,
    only: Sequence[str] | None = None,
    apply: bool = False,
    force: bool = False,
    opener: TargetOpener | None = None,
    scoped: bool = False,
    progress: Callable[[str], None] | None = None,
    specs: Sequence[TargetSpec[Any]] = SPECS,
    actor: Actor = RECONCILER,
    steps: Sequence[DesiredStep] = STEPS,
    cache: DesiredCache | None = None,
) -> Pass:
    """Plan (and with `apply`, reconcile) every selected target against the store. `progress` is
    told each step as it starts ("store", then each target's name; the targets run side by side),
    for a progress display.

    A full reconcile (every target) that ends cleanly also clears the outbox marks it covered: those
    read before the store snapshot, unless re-marked since.

    `scoped` (the reconciler's passes after writes): a target whose spec can scope reads and plans
    only the users and groups the outbox marks name, at most `MAX_SCOPED_USERS` users; the others
    read everything, as every scheduled pass does. Its latency then does not grow with the number of
    users it holds.

    `actor`: who asked (the audit log names them when `force` overrides a guard).
    `specs` are the targets there are (the registry's; tests pass a fake one); `opener`, if given,
    opens each target from its context instead of its spec's factory. `steps` adjust the desired
    state before the targets plan (sup/reconcile/steps.py; their writes only in a full applying pass).
    `cache`: the desired state kept between the reconciler's passes (sup/reconcile/desired_cache.py).
    """
    selected = _selected(specs, only)
    with sessions() as session:
        marks = outbox.pending(session) if apply and len(selected) == len(specs) else []
    scope = scope_of(marks) if scoped else None
    step = progress or (lambda _: None)
    step("store")
    store = _Phases()
    enabled = [spec for spec in selected if settings.target_enabled(spec.name)]
    desired = _load_desired(sessions, settings, enabled, scope, cache)
    store.done("desired state")
    if enabled:
        names = [spec.name for spec in enabled]
        desired = prepare(
            steps, sessions, settings, desired, names, write=apply and scope is None, actor=actor
        )
        store.done("steps")
    log.debug("%s pass, the store: %s", "scoped" if scope is not None else "full", store)
    window = settings.reconcile.budget_window_seconds
    spent = {s.name: _spent(sessions, s.name, window) if apply else Spent() for s in enabled}
    engine = _engine_of(sessions)
    held = HeldUsers(sessions, scope)  # the status rows, read when a target needs them

    providers = _providers(specs, settings)
    running: dict[str, Future[TargetPass]] = {}

    def gate(spec: TargetSpec[Any]) -> Gate | None:
        needed = {name for capability in spec.needs for name in providers.get(capability, ())}
        if not needed:
            return None
        return lambda desired, planned: replace(
            desired, identity_pending=_pending(desired, needed, held, running, scope, planned)
        )

    def one(spec: TargetSpec[Any]) -> TargetPass:
        step(spec.name)
        started = time.perf_counter()
        result = _one_target(
            spec,
            settings,
            engine,
            desired,
            held if apply else None,
            opener,
            spent=spent[spec.name],
            apply=apply,
            force=force,
            scope=scope,
            gate=gate(spec),
        )
        _count(result, time.perf_counter() - started, apply)
        return result

    # The targets are independent and mostly wait on their servers (slapd, sacctmgr/slurmdbd, the API
    # server), so they run side by side: a pass takes about as long as its slowest target, not the sum.
    # One exception: a target that needs what another provides (TargetSpec.needs, e.g. Slurm needs
    # the POSIX identity LDAP provides) observes alongside, then waits for the provider's outcome
    # before it plans (see `_pending`). Providers are submitted first, and there is a thread per
    # target, so the wait cannot starve. The store is read before and written after, from this
    # thread only.
    with ThreadPoolExecutor(max_workers=max(1, len(enabled)), thread_name_prefix="target") as pool:
        for spec in sorted(enabled, key=lambda s: bool(s.needs)):
            running[spec.name] = pool.submit(one, spec)
        done_by_name = {name: future.result() for name, future in running.items()}
    results = []
    for name in (spec.name for spec in selected):
        if name not in done_by_name:
            results.append(TargetPass(name, PassState.DISABLED))
            continue
        result = done_by_name[name]
        results.append(result)
        if apply:
            with sessions.begin() as session:
                record_statuses(
                    session,
                    name,
                    desired,
                    result.failed,
                    result.error if result.state in (PassState.ERROR, PassState.REFUSED) else None,
                    only=scope.users if result.scoped and scope is not None else None,
                )
                _record_spent(session, result, actor, window)
    done = Pass(results)
    if marks and done.ok:
        with sessions.begin() as session:
            outbox.clear(session, marks)
    return done


MAX_SCOPED_USERS = 200  # more named users than this: a scoped read costs more than a full one


def scope_of(marks: Sequence[tuple[str, str, int]]) -> Scope | None:
    """The users and groups the outbox marks name, or None (a full pass) when there are none, or too
    many users to read one by one."""
    users = frozenset(name for kind, name, _ in marks if kind == "user")
    changed = frozenset(name for kind, name, _ in marks if kind == "group")
    members = frozenset(name for kind, name, _ in marks if kind == "members")
    accounts = frozenset(name for kind, name, _ in marks if kind == "slurm_account")
    if not marks or len(users) > MAX_SCOPED_USERS:
        return None
    return Scope(users, changed | members, accounts, members_only=members - changed)


def _spent(sessions: sessionmaker[Session], target: str, window: int) -> Spent:
    with sessions() as session:
        return removals.spent(session, target, window)


def _record_spent(session: Session, result: TargetPass, actor: Actor, window: int) -> None:
    """Count what an applied pass took away against the target's budgets; audit an overridden guard."""
    if result.state not in (PassState.APPLIED, PassState.PARTIAL):
        return
    forced = result.overridden is not None
    removals.record(
        session,
        result.target,
        suspensions=result.spent.suspensions,
        deletions=result.spent.deletions,
        forced=forced,
        window_seconds=window,
    )
    if forced:
        after = {"refusal": result.overridden, "applied": len(result.applied), "failed": len(result.failed)}
        record(session, actor, "force", "target", result.target, after=after)


def _providers(specs: Sequence[TargetSpec[Any]], settings: Settings) -> dict[str, list[str]]:
    """capability -> the enabled targets that provide it (whether or not this pass selects them)."""
    found: dict[str, list[str]] = {}
    for spec in specs:
        if settings.target_enabled(spec.name):
            for capability in spec.provides:
                found.setdefault(capability, []).append(spec.name)
    return found


# Given the desired state and the scope the target plans (None: everything), the desired state to plan
# from: the planner's ordering of a target that needs what another provides.
Gate = Callable[[DesiredState, Scope | None], DesiredState]


def _pending(
    desired: DesiredState,
    providers: set[str],
    statuses: HeldUsers,
    running: dict[str, Future[TargetPass]],
    scope: Scope | None,
    planned: Scope | None,
) -> frozenset[str]:
    """The desired users some provider does not hold yet, among those the target plans (`planned`:
    the scope's, or None for all). A provider holds the users it had in sync after earlier passes,
    and, when it ran in this pass (`scope`: the pass's) without a target-wide failure, the users the
    pass covered (all, or the scope's) whose changes did not fail. Waits for the providers of this
    pass to finish (they apply first)."""
    candidates = desired.users.keys() if planned is None else desired.users.keys() & planned.users
    pending: set[str] = set()
    for name in providers:
        held = set(statuses.in_sync(name, scoped=planned is not None))
        future = running.get(name)
        if future is not None:
            result = future.result()
            if result.state in (PassState.PLANNED, PassState.APPLIED, PassState.PARTIAL):
                covered = scope.users if result.scoped and scope is not None else desired.users.keys()
                failed = {f.change.subject for f in result.failed}
                held |= {user for user in covered if user not in failed}
        pending |= {user for user in candidates if user not in held}
    return frozenset(pending)


def _count(result: TargetPass, seconds: float, apply: bool) -> None:
    metrics.PASS_DURATION.labels(result.target, "reconcile" if apply else "plan").observe(seconds)
    if not apply:
        return
    metrics.DRIFT_FOUND.labels(result.target).inc(len(result.changes))
    metrics.LAST_PASS_CHANGES.labels(result.target).set(len(result.changes))
    metrics.TARGET_UP.labels(result.target).set(
        0 if result.state in (PassState.ERROR, PassState.REFUSED) else 1
    )
    metrics.CHANGES_APPLIED.labels(result.target).inc(len(result.applied))
    metrics.CHANGES_FAILED.labels(result.target).inc(len(result.failed))
    if result.state == PassState.ERROR:
        metrics.TARGET_ERRORS.labels(result.target).inc()
    elif result.state == PassState.REFUSED:
        metrics.REFUSALS.labels(result.target).inc()
    elif result.state in (PassState.PLANNED, PassState.APPLIED):
        metrics.LAST_SUCCESS.labels(result.target).set_to_current_time()


def plan_from_session(
    settings: Settings,
    session: Session,
    *,
    opener: TargetOpener | None = None,
    specs: Sequence[TargetSpec[Any]] = SPECS,
    steps: Sequence[DesiredStep] = STEPS,
) -> Pass:
    """Plan every enabled target against the store as `session` sees it, uncommitted changes
    included (`sup import --dry-run --plan` shows the plan an import would lead to). The steps
    adjust the desired state but write nothing."""
    desired = derive(load_snapshot(session), policy_of(settings))
    enabled = [spec.name for spec in specs if settings.target_enabled(spec.name)]
    desired = adjusted(steps, session, settings, desired, enabled)
    bind = session.get_bind()
    engine = bind if isinstance(bind, Engine) else bind.engine
    return Pass(
        [
            _one_target(spec, settings, engine, desired, None, opener, apply=False, force=False)
            if settings.target_enabled(spec.name)
            else TargetPass(spec.name, PassState.DISABLED)
            for spec in specs
        ]
    )


def _budgeted(changes: Sequence[Change[AnyDetails]], active: frozenset[str]) -> int:
    """Deletions that count against reconcile.deletion_budget: all but the leftovers of users the
    target already holds locked (the lifecycle's expiries, counted when those users were locked)."""
    return sum(1 for c in changes if c.action == DELETE and (c.subject is None or c.subject in active))


def _stays_active(desired: DesiredState, username: str) -> bool:
    user = desired.users.get(username)
    return user is not None and user.active


def _engine_of(sessions: sessionmaker[Session]) -> Engine | None:
    """The engine the sessions are bound to: the targets' writer locks live in that store."""
    bind = sessions.kw.get("bind")
    if isinstance(bind, Engine):
        return bind
    return bind.engine if isinstance(bind, Connection) else None


def _one_target(
    spec: TargetSpec[Any],
    settings: Settings,
    engine: Engine | None,
    desired: DesiredState,
    held: HeldUsers | None,
    opener: TargetOpener | None,
    *,
    apply: bool,
    force: bool,
    scope: Scope | None = None,
    spent: Spent = Spent(),
    gate: Gate | None = None,
) -> TargetPass:
    """`held`: what the targets held after the passes so far (an applying pass's guards need it).
    `gate`: called after the observation, gives the desired state to plan against (the planner's
    ordering of targets that need what another provides)."""
    name = spec.name
    phases = _Phases()
    try:
        context = target_context(spec, settings, store_lock(engine))
        target = spec.open(context) if opener is None else opener(name, context)
    except TargetError as exc:
        return TargetPass(name, PassState.ERROR, error=str(exc), terminal=exc.terminal)
    except Exception as exc:  # e.g. the server is down or refuses the bind
        log.exception("cannot open target %s", name)
        return TargetPass(name, PassState.ERROR, error=f"cannot connect: {type(exc).__name__}: {exc}")
    try:
        if scope is not None and (
            spec.can_scope is None or not spec.can_scope(context.settings, scope, desired)
        ):
            scope = None
        phases.done("open")
        observed = target.observe(scope)
        phases.done("observe")
        if gate is not None:
            desired = gate(desired, scope)
            phases.done("wait for providers")
        changes = target.diff(desired, observed, scope)
        phases.done("plan")
        result = TargetPass(name, PassState.PLANNED, changes=changes, scoped=scope is not None)
        if not apply or not changes:
            return result
        assert held is not None, "an applying pass reads what the target holds"
        baseline = held.active(name, scoped=scope is not None)
        if not baseline.covers({c.subject for c in changes if c.subject is not None}):
            baseline = held.active(name, scoped=False)  # someone outside the scope: read everyone
        deletions = sum(1 for c in changes if c.action == DELETE)
        limit = settings.reconcile.max_deletions
        leaving = sorted(u for u in baseline.users if not _stays_active(desired, u))
        refusal = (
            (
                f"the plan deletes {deletions} objects, more than reconcile.max_deletions={limit}; "
                "check it with `sup plan` and rerun with --force if it is right"
            )
            if deletions > limit
            else mass_change(leaving, baseline.total, settings.reconcile)
            or budget_refusal(
                spent, leaving, _budgeted(changes, baseline.users), baseline.total, settings.reconcile
            )
        )
        if refusal is not None and not force:
            result.state, result.error = PassState.REFUSED, refusal
            return result
        result.overridden = refusal
        phases.done("guards")
        report = target.apply(changes)
        phases.done("apply")
        result.applied, result.failed = report.applied, report.failed
        result.state = PassState.PARTIAL if report.failed else PassState.APPLIED
        # Users whose removal went through (a scoped pass touches only the users it names).
        done = {c.subject for c in report.applied} - {f.change.subject for f in report.failed}
        result.spent = Spent(len(done.intersection(leaving)), _budgeted(report.applied, baseline.users))
        return result
    except (ObserveError, TargetError) as exc:
        return TargetPass(name, PassState.ERROR, error=str(exc), terminal=exc.terminal)
    except Exception as exc:  # a bug or an unexpected outage must not stop the other targets
        log.exception("target %s failed", name)
        return TargetPass(name, PassState.ERROR, error=f"unexpected error: {type(exc).__name__}: {exc}")
    finally:
        target.close()
        log.debug("%s pass, target %s: %s", "scoped" if scope is not None else "full", name, phases)


class _Phases:
    """How long each step took, for the debug log: where a pass's time goes, on a real site."""

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self._steps: list[tuple[str, float]] = []

    def done(self, step: str) -> None:
        now = time.perf_counter()
        self._steps.append((step, now - self._last))
        self._last = now

    def __str__(self) -> str:
        return ", ".join(f"{step} {seconds:.3f} s" for step, seconds in self._steps)
