"""Every error answer is an RFC 9457 problem+json body with the same shape:

    {"type": "about:blank", "title": "Invalid input", "status": 422, "detail": "...",
     "errors": [{"field": "username", "message": "..."}], "request_id": "..."}

`errors` names each offending field (dotted path, list items by index: `ssh_public_keys.1`).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm.exc import StaleDataError
from starlette.exceptions import HTTPException as StarletteHTTPException

from sup.errors import (
    ConfigurationError,
    Conflict,
    FieldError,
    Forbidden,
    InvalidInput,
    NotFound,
    PreconditionFailed,
    SupError,
)
from sup.store.models import Base

log = logging.getLogger(__name__)
PROBLEM_JSON = "application/problem+json"

_STATUS = {
    InvalidInput: 422,
    NotFound: 404,
    Forbidden: 403,
    Conflict: 409,
    PreconditionFailed: 412,
    ConfigurationError: 503,
}
_TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    412: "Precondition failed",
    413: "Payload too large",
    415: "Unsupported media type",
    422: "Invalid input",
    500: "Internal server error",
    503: "Service unavailable",
}
_LOCATIONS = {"body", "query", "path", "header", "cookie"}


def problem(
    request: Request | None,
    status: int,
    detail: str,
    *,
    errors: list[FieldError] | None = None,
    title: str | None = None,
    headers: dict[str, str] | None = None,
    request_id: str | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title or _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = [{"field": e.field, "message": e.message} for e in errors]
    if request is not None:
        request_id = getattr(request.state, "request_id", None)
    if request_id:
        body["request_id"] = request_id
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


def _field(loc: tuple[int | str, ...]) -> str:
    parts = list(loc)
    if parts and parts[0] in _LOCATIONS and len(parts) > 1:
        parts = parts[1:]
    return ".".join(str(p) for p in parts) or "body"


def _message(error: dict[str, Any]) -> str:
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required"
    message = str(error.get("msg", "invalid"))
    return re.sub(r"^(Value error|Assertion failed), ", "", message)


# Unique constraints and unique indexes by name -> the field they guard (names follow the metadata's
# naming convention; PostgreSQL names the index of a `unique=True, index=True` column, e.g.
# ix_users_home_directory).
def _constraint_fields() -> dict[str, str]:
    fields: dict[str, str] = {}
    for table in Base.metadata.tables.values():
        for constraint in table.constraints:
            columns = [c.name for c in getattr(constraint, "columns", [])]
            if constraint.name and columns:
                fields[str(constraint.name)] = columns[-1]
        for index in table.indexes:
            names = [c.name for c in index.columns]
            if index.unique and index.name and names:
                fields[str(index.name)] = names[-1]
    return fields


_CONSTRAINT_FIELDS = _constraint_fields()


def integrity_field(exc: IntegrityError) -> str | None:
    """Which field a violated constraint guards, from PostgreSQL's diagnostics or SQLite's message."""
    diag = getattr(exc.orig, "diag", None)
    name = getattr(diag, "constraint_name", None)
    if name:
        return _CONSTRAINT_FIELDS.get(name)
    match = re.search(r"UNIQUE constraint failed: ([\w.]+)", str(exc.orig))
    if match:
        return match.group(1).rsplit(".", 1)[-1]
    return None


def install(app: FastAPI) -> None:
    @app.exception_handler(SupError)
    async def _sup_error(request: Request, exc: SupError) -> JSONResponse:
        status = next((code for kind, code in _STATUS.items() if isinstance(exc, kind)), 400)
        errors = exc.errors if isinstance(exc, InvalidInput) else None
        if isinstance(exc, Conflict) and exc.field:
            errors = [FieldError(exc.field, exc.message)]
        detail = "the request breaks a rule; see errors" if isinstance(exc, InvalidInput) else exc.message
        return problem(request, status, detail, errors=errors, title=exc.title)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        raw = list(exc.errors())
        if any(e.get("type") == "json_invalid" for e in raw):
            return problem(request, 400, "the request body is not valid JSON")
        errors = [FieldError(_field(tuple(e.get("loc", ()))), _message(e)) for e in raw]
        return problem(request, 422, "the request breaks a rule; see errors", errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else _TITLES.get(exc.status_code, "error")
        return problem(request, exc.status_code, detail, headers=getattr(exc, "headers", None))

    @app.exception_handler(IntegrityError)
    async def _integrity(request: Request, exc: IntegrityError) -> JSONResponse:
        # The services check first; reaching here means a concurrent write won the race.
        field = integrity_field(exc)
        detail = f"{field} is already taken" if field else "the change conflicts with existing data"
        errors = [FieldError(field, "already taken (by a concurrent write)")] if field else None
        return problem(request, 409, detail, errors=errors)

    @app.exception_handler(StaleDataError)
    async def _stale(request: Request, exc: StaleDataError) -> JSONResponse:
        return problem(
            request, 409, "the object was changed by a concurrent request; read it again and retry"
        )

    @app.exception_handler(OperationalError)
    async def _database_down(request: Request, exc: OperationalError) -> JSONResponse:
        log.error("database error: %s", type(exc.orig).__name__)
        return problem(
            request, 503, "the database is unavailable; retry shortly", headers={"Retry-After": "5"}
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Starlette answers this one from its outermost layer, outside RequestIdMiddleware: name the id
        # here, in the log line and the header, so that what the client quotes finds the traceback.
        request_id = getattr(request.state, "request_id", None)
        log.exception(
            "unhandled error on %s %s", request.method, request.url.path, extra={"request_id": request_id}
        )
        return problem(
            request,
            500,
            "an internal error occurred; the request id identifies it in the logs",
            headers={"X-Request-ID": request_id} if request_id else None,
        )
