"""/scim/v2: the SCIM 2.0 service provider (RFC 7644 §3.2 endpoints).

- Discovery (RFC 7644 §4), readable without a token: /ServiceProviderConfig, /ResourceTypes[/{id}],
  /Schemas[/{id}].
- Resources, with a token of role `scim` (one per IdP connection) and the connection's rate limit:
  /Users and /Groups (GET with filter/sort/paging/attributes, POST), /{id} (GET, PUT, PATCH, DELETE),
  /{endpoint}/.search (POST), and /Bulk (POST).
- Searches at the root (RFC 7644 §3.4.2.1, §3.4.3): GET /scim/v2/ and POST /scim/v2/.search, over
  Users and Groups together (Users first, each by creation; `sortBy` there is 501: sort by type).
- Anything else under /scim/v2 is a SCIM 404 or 405; /Me is 501.

The routes are thin: scim2-server's handler runs the protocol, sup/scim/storage.py the store.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from fastapi.security import HTTPAuthorizationCredentials
from scim2_models import NotFoundException, NotImplementedException
from scim2_server.routing import Operation, match
from starlette.concurrency import run_in_threadpool

from sup.api.context import ApiContext, authorized, bearer_scheme, context, unauthorized
from sup.api.oidc import InvalidToken
from sup.api.ratelimit import retry_after_seconds
from sup.domain.roles import Role
from sup.domain.tokens import may_be_token
from sup.scim import lookup, member_patch
from sup.scim.errors import SCIM_PREFIX, RateLimited, ScimRoute, ServiceUnavailable
from sup.scim.metrics import SCIM_REQUESTS
from sup.scim.oauth import IssuerUnavailable, TooManyChecks
from sup.scim.provider import served_config
from sup.scim.runtime import base_url, http_response, runtime, scim_request
from sup.store.audit import Actor

router = APIRouter(prefix=SCIM_PREFIX, tags=["scim"], route_class=ScimRoute)


async def connection(
    request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer_scheme)
) -> ApiContext:
    """The SCIM connection making the request, within its rate limit (else 429): a SUP token of role
    `scim`, or an access token of a `scim.oauth` connection (sup/scim/oauth.py)."""
    ctx = await _authenticated(request, credentials)
    wait = runtime(request.app).limiter.acquire(ctx.actor.name)
    if wait > 0:
        raise RateLimited(retry_after=retry_after_seconds(wait))
    return ctx


async def _authenticated(request: Request, credentials: HTTPAuthorizationCredentials | None) -> ApiContext:
    oauth = runtime(request.app).oauth
    bearer = credentials.credentials if credentials and credentials.scheme.lower() == "bearer" else None
    if bearer is None or not oauth.configured or may_be_token(bearer):
        return await authorized(request, credentials, Role.scim)
    address = request.client.host if request.client else "?"
    try:
        name = await run_in_threadpool(oauth.connection_of, bearer, address)
    except InvalidToken as exc:
        raise unauthorized(str(exc)) from None
    except IssuerUnavailable as exc:
        raise ServiceUnavailable(detail=f"{exc}; retry shortly") from None
    except TooManyChecks as exc:
        raise RateLimited(
            retry_after=retry_after_seconds(exc.wait),
            detail="too many new access tokens from this address to check; retry after the Retry-After delay",
        ) from None
    request_id = getattr(request.state, "request_id", None)
    return context(request, Actor(name=name, role=Role.scim.value, request_id=request_id))


Connection = Annotated[ApiContext, Depends(connection)]


async def _serve(request: Request, ctx: ApiContext, operation: Operation) -> Response:
    scim = runtime(request.app)
    parsed = await scim_request(request, subject=ctx.actor.name)
    served = await run_in_threadpool(scim.serve, ctx, parsed, operation)
    return _counted(ctx, operation, http_response(served))


def _counted(ctx: ApiContext, operation: Operation, response: Response) -> Response:
    SCIM_REQUESTS.labels(ctx.actor.name, operation.name, str(response.status_code)).inc()
    return response


async def _search_users(request: Request, ctx: Connection) -> Response:
    """GET /Users: the IdPs' lookup by userName on its short path (sup/scim/lookup.py), any other
    search on the generic one."""
    query = request.query_params
    found = lookup.lookup_of(query, repeated=len(query.multi_items()) != len(query))
    if found is None:
        return await _serve(request, ctx, Operation.search)
    service = runtime(request.app).service
    answered = await run_in_threadpool(lookup.answer, service, ctx.engine, base_url(request), found)
    return _counted(ctx, Operation.search, http_response(answered))


async def _patch_group(request: Request, ctx: Connection, resource_id: str) -> Response:
    """PATCH /Groups/{id}: the IdPs' member change on its short path (sup/scim/member_patch.py),
    any other PATCH, or one the short path does not decide, on the generic one."""
    found = member_patch.member_patch_of(await request.body(), request.query_params, request.headers)
    if found is not None:
        service = runtime(request.app).service
        answered = await run_in_threadpool(
            member_patch.answer, service, ctx, base_url(request), resource_id, found
        )
        if answered is not None:
            return _counted(ctx, Operation.patch, http_response(answered))
    return await _serve(request, ctx, Operation.patch)


# --- discovery (RFC 7644 §4): no token -------------------------------------------------------------


@router.get("/ServiceProviderConfig", summary="What this SCIM service supports (RFC 7643 §5)")
def service_provider_config(request: Request) -> Response:
    service = runtime(request.app).service
    location = base_url(request) + "/ServiceProviderConfig"
    return http_response(served_config(service.service_provider_config(location, dict(request.query_params))))


@router.get("/ResourceTypes", summary="The resource types: User and Group (RFC 7643 §6)")
def resource_types(request: Request) -> Response:
    service = runtime(request.app).service
    return http_response(
        service.resource_types(base_url(request) + "/ResourceTypes", dict(request.query_params))
    )


@router.get("/ResourceTypes/{resource_type_id}", summary="One resource type")
def resource_type(request: Request, resource_type_id: str) -> Response:
    service = runtime(request.app).service
    location = base_url(request) + "/ResourceTypes/" + resource_type_id
    return http_response(service.resource_type(location, resource_type_id, dict(request.query_params)))


@router.get("/Schemas", summary="The schemas, the SUP extension included (RFC 7643 §7)")
def schemas(request: Request) -> Response:
    service = runtime(request.app).service
    return http_response(service.schemas(base_url(request) + "/Schemas", dict(request.query_params)))


@router.get("/Schemas/{schema_id}", summary="One schema")
def schema(request: Request, schema_id: str) -> Response:
    service = runtime(request.app).service
    location = base_url(request) + "/Schemas/" + schema_id
    return http_response(service.schema(location, schema_id, dict(request.query_params)))


# --- resources (RFC 7644 §3.3-§3.7) -----------------------------------------------------------------

for _endpoint, _kind in (("Users", "users"), ("Groups", "groups")):

    async def _search(request: Request, ctx: Connection) -> Response:
        return await _serve(request, ctx, Operation.search)

    async def _create(request: Request, ctx: Connection) -> Response:
        return await _serve(request, ctx, Operation.create)

    async def _search_with_body(request: Request, ctx: Connection) -> Response:
        return await _serve(request, ctx, Operation.search_with_body)

    async def _query(request: Request, ctx: Connection, resource_id: str) -> Response:
        return await _serve(request, ctx, Operation.query)

    async def _replace(request: Request, ctx: Connection, resource_id: str) -> Response:
        return await _serve(request, ctx, Operation.replace)

    async def _patch(request: Request, ctx: Connection, resource_id: str) -> Response:
        return await _serve(request, ctx, Operation.patch)

    async def _delete(request: Request, ctx: Connection, resource_id: str) -> Response:
        return await _serve(request, ctx, Operation.delete)

    router.add_api_route(
        f"/{_endpoint}",
        _search_users if _endpoint == "Users" else _search,
        methods=["GET"],
        summary=f"List or filter {_kind} (RFC 7644 §3.4.2)",
    )
    router.add_api_route(f"/{_endpoint}", _create, methods=["POST"], summary=f"Create one of the {_kind}")
    router.add_api_route(
        f"/{_endpoint}/.search", _search_with_body, methods=["POST"], summary=f"Search {_kind} (§3.4.3)"
    )
    router.add_api_route(f"/{_endpoint}/{{resource_id}}", _query, methods=["GET"], summary="Read one")
    router.add_api_route(f"/{_endpoint}/{{resource_id}}", _replace, methods=["PUT"], summary="Replace one")
    router.add_api_route(
        f"/{_endpoint}/{{resource_id}}",
        _patch_group if _endpoint == "Groups" else _patch,
        methods=["PATCH"],
        summary="Modify one (RFC 7644 §3.5.2)",
    )
    router.add_api_route(f"/{_endpoint}/{{resource_id}}", _delete, methods=["DELETE"], summary="Delete one")


@router.get("/", summary="Search Users and Groups together (RFC 7644 §3.4.2.1)")
async def search_root(request: Request, ctx: Connection) -> Response:
    return await _serve(request, ctx, Operation.search)


# The base URL itself, without the trailing slash, is the root too (no redirect: a 307 would make a
# client send its token again to wherever the Location points).
router.add_api_route("", search_root, methods=["GET"], include_in_schema=False)


@router.post("/.search", summary="Search Users and Groups together (RFC 7644 §3.4.3)")
async def search_root_with_body(request: Request, ctx: Connection) -> Response:
    return await _serve(request, ctx, Operation.search_with_body)


@router.post("/Bulk", summary="Several operations in one request (RFC 7644 §3.7)")
async def bulk(request: Request, ctx: Connection) -> Response:
    return await _serve(request, ctx, Operation.bulk)


@router.api_route(
    "/{path:path}",
    methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
    include_in_schema=False,
)
async def unknown(request: Request, path: str) -> Response:
    """Everything else under /scim/v2: SCIM's 404 and 405, and 501 for what SUP does not serve."""
    target = match(request.method, "/" + path)  # raises NotFoundException or MethodNotAllowedException
    if target.endpoint is not None and target.endpoint not in ("Users", "Groups"):
        raise NotFoundException(detail=f"no SCIM endpoint at /{path}")
    raise NotImplementedException(detail=f"{request.method} /{path} is not supported by SUP")
