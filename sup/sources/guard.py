"""The mass-change guard for `sup import --prune`, with the reconciler's limits: a file that suddenly
lists nobody must not suspend everybody. The reconciler checks again before anything reaches a target."""

from __future__ import annotations

from sup.config import Settings
from sup.reconcile.planner import too_many_suspensions
from sup.sources.plan import Plan


def prune_refusal(settings: Settings, plan: Plan) -> str | None:
    suspend = [i.name for i in plan.prune if i.action == "suspend"]
    deletes = [i.name for i in plan.prune if i.action == "delete"]
    if too_many_suspensions(settings, len(suspend), plan.active_users):
        shown = ", ".join(suspend[:5]) + (", ..." if len(suspend) > 5 else "")
        return (
            f"--prune would suspend {len(suspend)} of the {plan.active_users} active users ({shown}), over "
            f"reconcile.max_suspensions={settings.reconcile.max_suspensions} or max_suspension_share="
            f"{settings.reconcile.max_suspension_share:g}; check with --dry-run, rerun with --force if right"
        )
    if len(deletes) > settings.reconcile.max_deletions:
        return (
            f"--prune would delete {len(deletes)} groups, more than reconcile.max_deletions="
            f"{settings.reconcile.max_deletions}; check with --dry-run and rerun with --force if it is right"
        )
    return None
