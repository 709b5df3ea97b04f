"""GET /api/v1/plan and POST /api/v1/reconcile."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from pydantic import Field

from sup.api import API_PREFIX
from sup.api.context import Operator, Viewer
from sup.common.schemas import Body
from sup.errors import Conflict
from sup.reconcile.planner import Pass, run_pass
from sup.reconcile.render import pass_json
from sup.store.locks import LockTimeout, exclusive
from sup.store.models import utcnow
from sup.targets.registry import TARGET_NAMES

router = APIRouter(prefix=API_PREFIX, tags=["reconcile"])
# The registered targets' names, an enum in the OpenAPI schema (a Literal built from the registry).
if TYPE_CHECKING:
    TargetName = str
else:
    TargetName = Literal[TARGET_NAMES]


@router.get("/plan", summary="The changes a reconcile would make (changes nothing)")
def get_plan(
    ctx: Viewer, target: Annotated[list[TargetName] | None, Query(description="only these targets")] = None
) -> dict[str, Any]:
    started = utcnow()
    return _answer(run_pass(ctx.settings, ctx.sessions, only=target), started)


def _answer(result: Pass, started: datetime) -> dict[str, Any]:
    """The pass as the CLI prints it, and when it began (it reads the store from then on): a plan is
    a moment's view, the admin page shows when it was made."""
    return {**pass_json(result), "started_at": started.isoformat().replace("+00:00", "Z")}


class ReconcileRequest(Body):
    targets: list[TargetName] | None = Field(None, description="only these targets (default: all enabled)")
    force: bool = Field(
        False,
        description="apply even when a guard refuses (reconcile.max_deletions, max_suspensions, the window "
        "budgets); the override is audited",
    )


@router.post("/reconcile", summary="Apply the plan now")
async def post_reconcile(ctx: Operator, body: ReconcileRequest | None = None) -> dict[str, Any]:
    request = body or ReconcileRequest()

    def reconcile() -> dict[str, Any]:
        started = utcnow()
        try:
            with exclusive(ctx.engine, "reconcile", timeout=0):
                result = run_pass(
                    ctx.settings,
                    ctx.sessions,
                    only=request.targets,
                    apply=True,
                    force=request.force,
                    actor=ctx.actor,
                )
        except LockTimeout as exc:
            raise Conflict(f"{exc}; another reconcile is running, retry later") from exc
        return _answer(result, started)

    return await run_in_threadpool(reconcile)
