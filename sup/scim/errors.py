"""SCIM Error bodies for everything under /scim/v2 (RFC 7644 §3.12).

Every failure there answers `application/scim+json` with
`{"schemas": ["urn:ietf:params:scim:api:messages:2.0:Error"], "status": "404", "scimType": ...,
"detail": ...}` instead of the admin API's problem+json: authentication (401, with
WWW-Authenticate), role (403), unknown paths (404) and methods (405), bodies over the limit (413),
rate limits (429 with Retry-After), the services' rule violations (400 invalidValue, 409
uniqueness, 412) and unexpected errors (500).

`ScimRoute` is the route class of the SCIM router: it turns whatever a SCIM route raises, its
dependencies included (the bearer-token check), into such a body.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from scim2_models import (
    ConflictException,
    Error,
    ForbiddenException,
    InvalidValueException,
    NotFoundException,
    PreconditionFailedException,
    SCIMException,
    UniquenessException,
)
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm.exc import StaleDataError
from starlette.exceptions import HTTPException as StarletteHTTPException

from sup.api.errors import integrity_field
from sup.errors import (
    Conflict,
    FieldError,
    Forbidden,
    InvalidInput,
    NotFound,
    PreconditionFailed,
    SupError,
)

log = logging.getLogger(__name__)

SCIM_MEDIA_TYPE = "application/scim+json"
SCIM_PREFIX = "/scim/v2"
WWW_AUTHENTICATE = 'Bearer realm="SCIM"'


class RateLimited(SCIMException):
    """429: the connection sent more requests than `scim.rate_limit` allows (RFC 6585 §4)."""

    status = 429
    _default_detail = "Too many requests for this SCIM connection; retry after the Retry-After delay"

    def __init__(self, retry_after: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.retry_after = retry_after


class ServiceUnavailable(SCIMException):
    status = 503
    _default_detail = "The database is unavailable; retry shortly"


def error_body(status: int, detail: str, scim_type: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = Error(status=status, scim_type=scim_type or None, detail=detail).model_dump()
    return body


def error_response(
    status: int, detail: str, scim_type: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        error_body(status, detail, scim_type),
        status_code=status,
        headers=headers,
        media_type=SCIM_MEDIA_TYPE,
    )


# SUP field names (services, pydantic bodies) -> the SCIM attribute a client sent them as.
SCIM_ATTRIBUTE_OF = {
    "username": "userName",
    "login": "userName",
    "email": "emails",
    "display_name": "displayName",
    "given_name": "name.givenName",
    "family_name": "name.familyName",
    "external_id": "externalId",
    "scim_user_name_key": "userName",  # its unique index, should a concurrent write take a userName
    "active": "active",
    "uid_number": "urn:ietf:params:scim:schemas:extension:sup:2.0:User:uidNumber",
    "primary_gid": "urn:ietf:params:scim:schemas:extension:sup:2.0:User:gidNumber",
    "login_shell": "urn:ietf:params:scim:schemas:extension:sup:2.0:User:loginShell",
    "home_directory": "urn:ietf:params:scim:schemas:extension:sup:2.0:User:homeDirectory",
    "ssh_public_keys": "urn:ietf:params:scim:schemas:extension:sup:2.0:User:sshPublicKeys",
    "name": "displayName",
    # A SCIM Group carries no gid: through SCIM a group's gid changes only as the private group of a
    # user whose gidNumber changed, so an error about it is an error about that gidNumber.
    "gid_number": "urn:ietf:params:scim:schemas:extension:sup:2.0:User:gidNumber",
    "members": "members",
    "description": "displayName",
}


def scim_attribute(field: str) -> str:
    """`ssh_public_keys.1` -> `urn:...:sshPublicKeys[1]`: the SCIM name of a SUP field path."""
    head, _, rest = field.partition(".")
    name = SCIM_ATTRIBUTE_OF.get(head, head)
    return f"{name}[{rest}]" if rest.isdigit() else (f"{name}.{rest}" if rest else name)


def _field_errors(errors: list[FieldError]) -> str:
    return "; ".join(f"{scim_attribute(e.field)}: {e.message}" for e in errors)


def from_sup_error(exc: SupError) -> SCIMException:
    """A service's error as the SCIM error a client understands (RFC 7644 §3.12 Table 9)."""
    if isinstance(exc, InvalidInput):
        return InvalidValueException(detail=_field_errors(exc.errors))
    if isinstance(exc, Conflict):
        # A conflict on a field is a taken value (userName, displayName, uid, an SSH key): uniqueness.
        # Others (a group bound to a Slurm account) are plain 409s.
        if exc.field:
            return UniquenessException(detail=f"{scim_attribute(exc.field)}: {exc.message}")
        return ConflictException(detail=exc.message)
    if isinstance(exc, NotFound):
        return NotFoundException(detail=exc.message)
    if isinstance(exc, Forbidden):
        return ForbiddenException(detail=exc.message)
    if isinstance(exc, PreconditionFailed):
        return PreconditionFailedException(detail=exc.message)
    return InvalidValueException(detail=exc.message)


def from_exception(exc: Exception) -> SCIMException:
    """Any exception raised while serving a SCIM request, as a SCIM exception."""
    if isinstance(exc, SCIMException):
        return exc
    if isinstance(exc, SupError):
        return from_sup_error(exc)
    if isinstance(exc, IntegrityError):
        # The services check first; reaching here means a concurrent write took the value.
        field = integrity_field(exc)
        if field is not None:
            return UniquenessException(detail=f"{scim_attribute(field)}: taken by a concurrent request")
        return UniquenessException(detail="a value of this resource was taken by a concurrent request")
    if isinstance(exc, StaleDataError):
        return ConflictException(
            detail="the resource was changed by a concurrent request; read it again and retry"
        )
    if isinstance(exc, OperationalError):
        log.error("database error: %s", type(exc.orig).__name__)
        return ServiceUnavailable()
    log.exception("unhandled error in a SCIM request", exc_info=exc)
    error = SCIMException(detail="An internal error occurred; the request id identifies it in the logs")
    error.status = 500
    return error


def exception_response(exc: Exception) -> JSONResponse:
    """The SCIM error response of any exception, with the headers its status calls for."""
    if isinstance(exc, StarletteHTTPException):
        return http_exception_response(exc.status_code, str(exc.detail), dict(exc.headers or {}))
    if isinstance(exc, RequestValidationError):
        messages = "; ".join(str(e.get("msg", "invalid")) for e in exc.errors())
        return error_response(400, f"invalid request: {messages}", "invalidValue")
    scim = from_exception(exc)
    headers: dict[str, str] = {}
    if isinstance(scim, RateLimited):
        headers["Retry-After"] = str(scim.retry_after)
    if isinstance(scim, ServiceUnavailable):
        headers["Retry-After"] = "5"
    if scim.status == 401:
        headers["WWW-Authenticate"] = WWW_AUTHENTICATE
    allowed = getattr(scim, "allowed", None)
    if scim.status == 405 and allowed:
        headers["Allow"] = ", ".join(allowed)  # RFC 9110 §15.5.6
    error = scim.to_error()
    return error_response(error.status or 500, error.detail or "", error.scim_type, headers or None)


def http_exception_response(status: int, detail: str, headers: dict[str, str] | None) -> JSONResponse:
    headers = dict(headers or {})
    if status == 401:
        headers["WWW-Authenticate"] = WWW_AUTHENTICATE  # SCIM's realm, not the admin API's
    return error_response(status, detail, None, headers or None)


def forbidden(detail: str) -> ForbiddenException:
    return ForbiddenException(detail=detail)


class ScimRoute(APIRoute):
    """A route whose every failure, its dependencies' included, is a SCIM Error body."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def scim_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:  # every failure becomes a SCIM Error body
                return exception_response(exc)

        return scim_handler
