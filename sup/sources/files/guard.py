"""The mass-change guard for `sup import --prune`, with the reconciler's limits: a file that suddenly
lists nobody must not suspend everybody. The rule is sup/domain/guards.py; the reconciler checks
again before anything reaches a target.

The reconcile budgets over a time window (`reconcile.suspension_budget`, ...) are not checked here:
the suspensions a prune writes count against them once, on each target, when the reconciler applies
them (sup/domain/guards.py `budget_refusal`), as every other source's do."""

from __future__ import annotations

from sup.config import Settings
from sup.domain import guards
from sup.sources.files.plan import Plan


def prune_refusal(settings: Settings, plan: Plan) -> str | None:
    suspend = [i.name for i in plan.prune if i.action == "suspend"]
    deletes = sum(1 for i in plan.prune if i.action == "delete")
    return guards.prune_refusal(suspend, deletes, plan.active_users, settings.reconcile)
