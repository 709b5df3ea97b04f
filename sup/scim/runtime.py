"""What the SCIM routes share in one app: the protocol service, the rate limiter, and how a request
is served inside one database transaction."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Union

from fastapi import FastAPI, Request
from fastapi.responses import Response
from scim2_models import (
    BulkRequest,
    BulkResponse,
    Context,
    ListResponse,
    PatchOp,
    Path,
    ResourceType,
    ResponseParameters,
    SearchRequest,
)
from scim2_server.requests import ScimRequest
from scim2_server.responses import ScimResponse
from scim2_server.routing import Operation
from scim2_server.storage import SearchPage

from sup.api.context import ApiContext
from sup.api.ratelimit import RateLimiter
from sup.config import Settings
from sup.scim.errors import SCIM_MEDIA_TYPE, SCIM_PREFIX
from sup.scim.oauth import ScimOAuth
from sup.scim.provider import build_provider
from sup.scim.service import SupScimHandler, SupScimService
from sup.scim.storage import SqlStorage

_lock = threading.Lock()


class _Service(SupScimService):
    def patch_response(
        self, base_url: str, resource: Any, response_parameters: ResponseParameters[Any]
    ) -> ScimResponse:
        """RFC 7644 §3.5.2: 200 with the resource (Okta and Entra ID read it; 204 is only a MAY).

        Published in place: the storage builds the resource for this one response."""
        return self.resource_response(
            self._published_in_place(base_url, resource),
            Context.RESOURCE_REPLACEMENT_RESPONSE,
            response_parameters,
        )

    def search_response(
        self,
        base_url: str,
        resource_types: list[ResourceType],
        page: SearchPage,
        search_request: SearchRequest[Any],
    ) -> ScimResponse:
        """A page of found resources, each dumped once.

        scim2-server dumps each resource, then validates the dumps again into a ListResponse and dumps
        that: a second full validation of every resource, about a fifth of a filtered GET's CPU. Here
        the envelope is dumped alone and the resources' dumps put into it as they are. Cursor
        paging (and a storage without a total) keeps the library's path.
        """
        if search_request.cursor is not None or page.total is None:
            return super().search_response(base_url, resource_types, page, search_request)
        dumped = [
            self._published_in_place(base_url, resource).model_dump(
                scim_ctx=Context.RESOURCE_QUERY_RESPONSE, response_parameters=search_request
            )
            for resource in page.resources
        ]
        union: Any = Union[tuple(self.get_models())]  # noqa: UP007 - a runtime union of the served models
        list_response: Any = ListResponse[union]
        envelope = list_response(
            total_results=page.total, items_per_page=len(dumped), start_index=search_request.start_index
        )
        body = envelope.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE)
        body["Resources"] = dumped
        return ScimResponse(HTTPStatus.OK, body)

    def _published_in_place(self, base_url: str, resource: Any) -> Any:
        """`publish` without its deep copy of the resource (a tenth of a lookup's CPU): a page's
        resources are built by the storage for this one response, and nothing else holds them."""
        update: dict[str, Any] = {
            "location": self.resource_location(base_url, self.get_resource_type_of(resource), resource.id)
        }
        if not self.etag_supported:
            update["version"] = None
        resource.meta = resource.meta.model_copy(update=update)
        self._publish_references(base_url, resource)
        return resource


# Operations that read one resource and write it back: its row is locked for the transaction.
CHANGES_ONE = frozenset({Operation.replace, Operation.patch, Operation.delete})


@dataclass
class ScimRuntime:
    settings: Settings
    service: SupScimService
    limiter: RateLimiter
    oauth: ScimOAuth
    # Strong references to the generic classes the service parametrizes on every request: pydantic
    # and scim2-models cache them weakly, and rebuilding one costs milliseconds.
    generics: list[Any] = field(default_factory=list)

    def serve(self, ctx: ApiContext, request: ScimRequest, operation: Operation) -> ScimResponse:
        """Serve one SCIM request in one transaction: committed if it succeeds, rolled back if not.

        A bulk request commits the operations that succeeded; each ran in its own savepoint.
        """
        with ctx.sessions.begin() as session:
            storage = SqlStorage(
                session,
                ctx.settings,
                ctx.actor,
                ctx.actor.name,
                savepoints=operation is Operation.bulk,
                lock=operation in CHANGES_ONE,
            )
            handler = SupScimHandler(self.service, storage)
            response: ScimResponse = getattr(handler, operation.value)(request)
            return response


def runtime(app: FastAPI) -> ScimRuntime:
    """The app's SCIM runtime, built on first use from the app's settings."""
    found: ScimRuntime | None = getattr(app.state, "scim", None)
    if found is not None:
        return found
    with _lock:
        found = getattr(app.state, "scim", None)
        if found is None:
            settings: Settings = app.state.settings
            service = _Service(build_provider(settings))
            found = ScimRuntime(
                settings=settings,
                service=service,
                limiter=RateLimiter(settings.scim.rate_limit),
                oauth=ScimOAuth(settings.scim),
                generics=_parametrized(service),
            )
            app.state.scim = found
    return found


def _parametrized(service: SupScimService) -> list[Any]:
    models = service.get_models()
    union: Any = Union[tuple(models)]  # noqa: UP007 - a runtime union of the served models
    kept: list[Any] = [
        SearchRequest[union],
        ListResponse[union],
        BulkRequest[union],
        BulkResponse[union],
    ]
    for model in models:
        for generic in (SearchRequest, ResponseParameters, PatchOp, Path):
            kept.append(generic[model])
    return kept


def base_url(request: Request) -> str:
    """The SCIM root as the client sees it, e.g. `http://sup.example.org/scim/v2`."""
    return str(request.base_url).rstrip("/") + SCIM_PREFIX


async def scim_request(request: Request, subject: str | None = None) -> ScimRequest:
    path = request.url.path
    relative = path[len(SCIM_PREFIX) :] if path.startswith(SCIM_PREFIX) else path
    return ScimRequest(
        method=request.method,
        base_url=base_url(request),
        path=relative or "/",
        query=dict(request.query_params),
        headers=list(request.headers.items()),
        body=await request.body(),
        subject=subject,
    )


def http_response(response: ScimResponse) -> Response:
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-type"}
    if response.body is None or response.status in (HTTPStatus.NO_CONTENT, HTTPStatus.NOT_MODIFIED):
        return Response(status_code=int(response.status), headers=headers)
    from fastapi.responses import JSONResponse

    return JSONResponse(
        response.body, status_code=int(response.status), headers=headers, media_type=SCIM_MEDIA_TYPE
    )
