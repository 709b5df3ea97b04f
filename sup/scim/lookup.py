"""The lookup every IdP makes before it writes a user, on a short path.

Okta, Entra ID and OneLogin ask `GET /Users?filter=userName eq "..."` for each person they sync, on
every cycle: by far the most frequent SCIM request. The generic search parses the filter into
scim2-models' tree, compiles it to SQL (sup/scim/filtering) and builds the ORM query anew; for this
one shape that costs about as much as the rest of the answer (BENCHMARKS.md, "SCIM throughput").

`lookup_of` recognises exactly that shape: one `userName eq` comparison (the attribute name in any
case, or under the core schema's URN) with a plain string (no backslash escapes) within the filter
caps (sup/scim/filtering/limits.py), beside at most `startIndex` and `count`. Anything else, or any
doubt, returns None and the request takes the generic path. `answer` then runs one prepared query
on the indexed comparison key and leaves the rest to what the generic path uses too: scim2-server
validates `startIndex` and `count` (bounds, the default page size, the pagination the
configuration announces), `user_resource` maps the rows, and the service's `search_response`
publishes and dumps the page. tests/scim/test_lookup.py holds the two paths' answers equal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scim2_server.responses import ScimResponse
from scim2_server.storage import SearchPage
from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from sup.scim.filtering import MAX_FILTER_LENGTH, MAX_FILTER_VALUE_LENGTH
from sup.scim.filtering.attributes import user_name_is
from sup.scim.mapping import USERS_ENDPOINT, comparison_key, user_resource
from sup.scim.service import SupScimService
from sup.scim.storage import lookup_options
from sup.store.models import User

_PARAMETERS = frozenset({"filter", "startIndex", "count"})
# userName eq "value": one space each side of `eq`, as IdPs send it; the value a JSON string
# without escapes (an escaped quote or backslash takes the generic path, which decodes it).
_FILTER = re.compile(
    r'(?:urn:ietf:params:scim:schemas:core:2\.0:User:)?username eq "([^"\\\x00-\x1f]*)"', re.IGNORECASE
)

# The rows and the loading of the generic search's `userName eq`, built once with the key bound.
_QUERY = select(User).where(user_name_is(bindparam("key"))).order_by(User.id).options(*lookup_options())


@dataclass(frozen=True)
class Lookup:
    """A lookup by userName, and the paging parameters that came with it (as sent)."""

    user_name: str
    paging: dict[str, str]


def lookup_of(query: Mapping[str, str], repeated: bool = False) -> Lookup | None:
    """The lookup a `GET /Users` query asks for, or None when it asks for anything else.

    `repeated`: some parameter came more than once (the generic path decides what that means)."""
    if repeated or not _PARAMETERS.issuperset(query) or "filter" not in query:
        return None
    text = query["filter"]
    if len(text) > MAX_FILTER_LENGTH:
        return None
    match = _FILTER.fullmatch(text)
    if match is None or len(match.group(1)) > MAX_FILTER_VALUE_LENGTH:  # over a cap: the generic 400
        return None
    return Lookup(match.group(1), {k: v for k, v in query.items() if k != "filter"})


def answer(service: SupScimService, engine: Engine, base_url: str, lookup: Lookup) -> ScimResponse:
    """The ListResponse of a lookup, as the generic search would answer it."""
    with service.provider:
        service.ensure_supported(service.config.filter, "Filtering")
        resource_types = service.searched_types(USERS_ENDPOINT)
        search_request, _ = service.read_search_query(resource_types, lookup.paging)
        assert search_request.cursor is None  # SUP pages by index only (sup/scim/provider.py)
        with engine.connect() as connection, Session(bind=_one_statement(connection)) as session:
            rows = session.scalars(_QUERY, {"key": comparison_key(lookup.user_name)}).unique().all()
            offset = (search_request.start_index or 1) - 1
            count = search_request.count
            chosen = rows[offset:] if count is None else rows[offset : offset + count]
            resources: list[Any] = [user_resource(row) for row in chosen]
        page = SearchPage(total=len(rows), resources=resources)
        return service.search_response(base_url, resource_types, page, search_request)


def _one_statement(connection: Connection) -> Connection:
    """One SELECT sees one snapshot by itself: on PostgreSQL it runs without a transaction around it
    (two round trips fewer, BEGIN and COMMIT). SQLite keeps its transaction: SUP opens each one
    itself (sup/store/session.py), which an autocommit connection would leave open."""
    if connection.dialect.name == "postgresql":
        return connection.execution_options(isolation_level="AUTOCOMMIT")
    return connection
