"""/healthz (the process answers), /readyz (it can do its job), /metrics (Prometheus). No token."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from sup.config import Settings
from sup.store.migrate import current_revision, head_revision
from sup.targets.registry import TARGET_NAMES

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness: the process is up")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: database reachable and migrated; targets and sources")
def readyz(request: Request) -> JSONResponse:
    settings: Settings = request.app.state.settings
    database: dict[str, Any] = {}
    ready = True
    try:
        engine = request.app.state.engine
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        current, head = current_revision(engine), head_revision()
        database = {"state": "ok" if current == head else "not_migrated", "revision": current, "head": head}
        ready = current == head
    except SQLAlchemyError as exc:
        database = {"state": "unreachable", "error": type(exc).__name__}
        ready = False
    targets = {t: ("configured" if settings.target_enabled(t) else "disabled") for t in TARGET_NAMES}
    sources = {"keycloak": "configured" if settings.keycloak is not None else "disabled"}
    body = {
        "status": "ready" if ready else "not_ready",
        "database": database,
        "targets": targets,
        "sources": sources,
    }
    worker = getattr(request.app.state, "reconciler", None)
    # The reconciler's view: which replica leads, and how each target fared in the last pass (a target
    # that is down shows here; the API itself stays ready and keeps accepting writes).
    body["reconciler"] = worker.state.as_json() if worker is not None else {"role": "off"}
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
