"""Steps that adjust the desired state before the targets plan, and the registry of them.

The planner derives the desired state from the store, then hands it to each step in `STEPS` before
any target plans from it; it names no step and no feature. A step is the desired state's business
that is not a target's: login pods that sleep (sup/logins/sleep.py) render with no replica, so the
Kubernetes target plans them asleep without knowing why. Adding a step is one line in `STEPS`, as
adding a target is one line in sup/targets/registry.py; every entry point that plans or applies
(`sup serve`'s reconciler, GET /plan, POST /reconcile, `sup plan`, `sup reconcile`, `sup import
--dry-run --plan`) goes through the planner and so runs every registered step.

A step may write the store first (`act`, in a transaction of its own, only in a full applying pass:
the scheduled one, a retry, `sup reconcile`; never in a plan or a pass scoped to a few users), then
gives the desired state to plan from (`adjust`, read in every pass, plans included). A step whose
`runs` says no for this site and these targets is skipped: it reads nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.domain.desired import DesiredState
from sup.logins.sleep import SLEEP_STEP
from sup.ssh_ca.step import SSH_CA_STEP
from sup.store.audit import Actor
from sup.store.models import utcnow


class DesiredStep(Protocol):
    """What the planner asks of a step (see the module's docstring)."""

    @property
    def name(self) -> str:
        """For logs and tests."""
        ...

    def runs(self, settings: Settings, targets: Collection[str]) -> bool:
        """Whether the step takes part in a pass over these enabled targets on this site."""
        ...

    def act(
        self, session: Session, settings: Settings, desired: DesiredState, now: datetime, actor: Actor
    ) -> None:
        """Write the store before a full applying pass plans (`actor`: who asked for the pass)."""
        ...

    def adjust(self, session: Session, settings: Settings, desired: DesiredState) -> DesiredState:
        """The desired state the targets plan from."""
        ...


STEPS: tuple[DesiredStep, ...] = (SLEEP_STEP, SSH_CA_STEP)


def prepare(
    steps: Sequence[DesiredStep],
    sessions: sessionmaker[Session],
    settings: Settings,
    desired: DesiredState,
    targets: Collection[str],
    *,
    write: bool,
    actor: Actor,
) -> DesiredState:
    """Run the steps that take part in this pass, in order: each one's `act` (with `write`, in a
    transaction of its own), then its `adjust`, which the next step starts from."""
    for step in steps:
        if not step.runs(settings, targets):
            continue
        if write:
            with sessions.begin() as session:
                step.act(session, settings, desired, utcnow(), actor)
        with sessions() as session:
            desired = step.adjust(session, settings, desired)
    return desired


def adjusted(
    steps: Sequence[DesiredStep],
    session: Session,
    settings: Settings,
    desired: DesiredState,
    targets: Collection[str],
) -> DesiredState:
    """The steps' `adjust` only, in one session that may hold uncommitted changes (a dry run's plan)."""
    for step in steps:
        if step.runs(settings, targets):
            desired = step.adjust(session, settings, desired)
    return desired
