"""POST /api/v1/sources/keycloak/sync (pull now) and GET /api/v1/sources/keycloak (where it stands)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from pydantic import Field

from sup.api import API_PREFIX
from sup.api.context import Operator, Viewer
from sup.common.schemas import Body
from sup.errors import NotFound
from sup.sources.keycloak.runner import NAME, full_sync
from sup.store.models import SourceState

router = APIRouter(prefix=API_PREFIX, tags=["sources"])
SourceName = Literal["keycloak"]
SYNC_WAIT_SECONDS = 30.0


class SyncRequest(Body):
    force: bool = Field(
        False,
        description="apply even when the pull would suspend more users than reconcile.max_suspensions "
        "(or the share max_suspension_share) allows",
    )


class SourceNotConfigured(NotFound):
    """A source that is not configured is not there (404), not a server failing (5xx)."""

    def __init__(self, name: str, hint: str) -> None:
        super().__init__("source", name)
        self.message = f"the {name} source is not configured ({hint})"


def _configured(ctx: Any) -> None:
    if ctx.settings.keycloak is None:
        raise SourceNotConfigured("Keycloak", "SUP_KEYCLOAK__URL, ...")


@router.get("/sources/{name}", summary="The source's last pull: when, what it did, the last error")
def get_source(ctx: Viewer, name: SourceName) -> dict[str, Any]:
    _configured(ctx)
    with ctx.transaction() as session:
        state = session.get(SourceState, NAME)
        if state is None:
            return {
                "name": name,
                "last_full_at": None,
                "last_attempt_at": None,
                "last_error": None,
                "last_result": None,
            }
        return {
            "name": name,
            "last_full_at": state.last_full_at,
            "last_attempt_at": state.last_attempt_at,
            "last_error": state.last_error,
            "last_result": state.last_result,
        }


@router.post("/sources/{name}/sync", summary="Pull users, groups and memberships from the source now")
async def post_sync(ctx: Operator, name: SourceName, body: SyncRequest | None = None) -> dict[str, Any]:
    """Answers with the pull's report: what was created, updated, suspended; conflicts and errors.
    `refused` is set (and nothing changed) when the answer would suspend too many users."""
    _configured(ctx)
    request = body or SyncRequest()
    # An incremental pull holds the lock for moments; a full one that is running answers 409 after this.
    report = await run_in_threadpool(
        full_sync, ctx.settings, ctx.engine, ctx.sessions, force=request.force, wait=SYNC_WAIT_SECONDS
    )
    return report.as_json()
