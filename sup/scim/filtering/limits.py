"""How long a SCIM filter may be: RFC 7644 §3.4.2.2 sets no limit, SUP does.

A filter is read from a URL or a search body and compiled to one SQL statement, each value a bound
parameter (`co`, `sw` and `ew` become `LIKE` patterns). Without a cap, a value of tens of kilobytes
reached the database, whose failure answered 503 with Retry-After: an IdP retried the same request
forever. Over a cap, the answer is 400 `invalidFilter` (RFC 7644 §3.12), which an IdP does not retry.

The caps leave room for what IdPs send: a lookup by userName, externalId or id, or a few dozen ids
OR-ed together when reconciling.
"""

from __future__ import annotations

from typing import Any

from scim2_models import InvalidFilterException
from scim2_models.path import Comparison, LogicalExpr, Not, ValuePath

MAX_FILTER_LENGTH = 4096
"""The most characters one filter may have, operators, attribute names and quotes included."""

MAX_FILTER_VALUE_LENGTH = 1024
"""The most characters one compared value may have (RFC 7643 §2.2 strings, ids, dates): longer
than any name, email, id or SSH key comment SUP stores (an SSH key itself is not filterable)."""


def check_filter_length(text: str) -> None:
    """Refuse a filter longer than `MAX_FILTER_LENGTH` before it is parsed."""
    if len(text) > MAX_FILTER_LENGTH:
        raise InvalidFilterException(
            detail=f"the filter has {len(text)} characters; SUP serves filters of at most "
            f"{MAX_FILTER_LENGTH}: split the search"
        )


def check_value_lengths(node: Any) -> None:
    """Refuse a parsed filter that compares with a value longer than `MAX_FILTER_VALUE_LENGTH`."""
    if isinstance(node, LogicalExpr):
        for term in node.terms:
            check_value_lengths(term)
    elif isinstance(node, Not):
        check_value_lengths(node.expr)
    elif isinstance(node, ValuePath):
        check_value_lengths(node.val_filter)
    elif (
        isinstance(node, Comparison)
        and isinstance(node.value, str)
        and len(node.value) > MAX_FILTER_VALUE_LENGTH
    ):
        raise InvalidFilterException(
            detail=f"a value of the filter has {len(node.value)} characters; SUP compares values of "
            f"at most {MAX_FILTER_VALUE_LENGTH} (attribute {node.attr_path})"
        )
