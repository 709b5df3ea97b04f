"""Steps before the targets plan (sup/reconcile/steps.py): what a registered step's `adjust` returns
is what the targets plan from, its `act` writes only in a full applying pass, and a step that does not
run for this pass is not asked anything. The planner's defaults are the registry's."""

from __future__ import annotations

import inspect
from collections.abc import Collection
from dataclasses import replace
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.domain.desired import DesiredState
from sup.logins.sleep import SLEEP_STEP
from sup.reconcile.planner import plan_from_session, run_pass
from sup.reconcile.steps import STEPS, DesiredStep
from sup.reconcile.worker import Reconciler
from sup.store.audit import Actor
from tests.conftest import ACTOR
from tests.support.fake_target import FakeTarget, fake_spec
from tests.support.store_edits import add_users


class HideStep:
    """A step that leaves `hidden` out of the desired state, and counts its calls."""

    name = "hide"

    def __init__(self, hidden: str, *, targets: Collection[str] = ("fake",)) -> None:
        self.hidden = hidden
        self.targets = targets
        self.acts: list[str] = []
        self.adjusts = 0

    def runs(self, settings: Settings, targets: Collection[str]) -> bool:
        return any(t in self.targets for t in targets)

    def act(
        self, session: Session, settings: Settings, desired: DesiredState, now: datetime, actor: Actor
    ) -> None:
        self.acts.append(actor.name)

    def adjust(self, session: Session, settings: Settings, desired: DesiredState) -> DesiredState:
        self.adjusts += 1
        users = {name: user for name, user in desired.users.items() if name != self.hidden}
        return replace(desired, users=users)


def test_the_targets_plan_from_what_the_steps_adjusted(
    configured: Settings, sessions: sessionmaker[Session]
) -> None:
    add_users(sessions, configured, "kim", "saul")
    step = HideStep("saul")
    steps: list[DesiredStep] = [step]

    planned = run_pass(configured, sessions, specs=[fake_spec(FakeTarget({}))], steps=steps)
    assert [(c.action, c.name) for c in planned.changes] == [("create", "kim")]
    assert step.acts == [] and step.adjusts == 1  # a plan writes nothing

    fake = FakeTarget({})
    applied = run_pass(configured, sessions, specs=[fake_spec(fake)], steps=steps, apply=True, actor=ACTOR)
    assert applied.ok and set(fake.system) == {"kim"}
    assert step.acts == [ACTOR.name] and step.adjusts == 2  # a full applying pass: act, then adjust

    with sessions() as session:  # a dry run's plan: adjust only, in the caller's session
        dry = plan_from_session(configured, session, specs=[fake_spec(fake)], steps=steps)
    assert dry.changes == [] and step.acts == [ACTOR.name] and step.adjusts == 3


def test_a_scoped_pass_adjusts_but_does_not_act(
    configured: Settings, sessions: sessionmaker[Session]
) -> None:
    """A pass after writes (the reconciler's, scoped to what the outbox names) plans from the steps'
    desired state but leaves their writes to the full passes."""
    add_users(sessions, configured, "kim", "saul")
    step = HideStep("saul")
    fake = FakeTarget({})
    result = run_pass(configured, sessions, specs=[fake_spec(fake)], steps=[step], apply=True, scoped=True)
    assert result.ok and set(fake.system) == {"kim"}
    assert step.acts == [] and step.adjusts == 1


def test_a_step_that_does_not_run_here_is_not_asked(
    configured: Settings, sessions: sessionmaker[Session]
) -> None:
    add_users(sessions, configured, "kim", "saul")
    step = HideStep("saul", targets=("kube",))  # as the sleep step: only in a pass over Kubernetes
    fake = FakeTarget({})
    result = run_pass(configured, sessions, specs=[fake_spec(fake)], steps=[step], apply=True)
    assert result.ok and set(fake.system) == {"kim", "saul"}
    assert step.acts == [] and step.adjusts == 0


def test_every_entry_point_runs_the_registered_steps_by_default() -> None:
    """`sup serve`'s reconciler, /plan, /reconcile, `sup plan`, `sup reconcile` and `sup import
    --dry-run --plan` call these without steps: they get the registry, which has the sleep step."""
    assert SLEEP_STEP in STEPS
    assert inspect.signature(run_pass).parameters["steps"].default is STEPS
    assert inspect.signature(plan_from_session).parameters["steps"].default is STEPS
    assert inspect.signature(Reconciler.__init__).parameters["steps"].default is STEPS
