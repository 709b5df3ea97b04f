"""limit/offset query parameters, with the page size capped by settings (api.max_page_size)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request

from sup.errors import FieldError, InvalidInput


@dataclass(frozen=True)
class PageParams:
    limit: int
    offset: int


def max_page_size(request: Request) -> int:
    return int(request.app.state.settings.api.max_page_size)


def page_params(
    request: Request,
    limit: Annotated[
        int | None, Query(ge=1, description="items per page (default api.default_page_size)")
    ] = None,
    offset: Annotated[int, Query(ge=0, le=10**9, description="items to skip")] = 0,
) -> PageParams:
    api = request.app.state.settings.api
    if limit is not None and limit > api.max_page_size:
        raise InvalidInput(FieldError("limit", f"at most {api.max_page_size} items per page"))
    return PageParams(limit=limit or api.default_page_size, offset=offset)


Paging = Annotated[PageParams, Depends(page_params)]
