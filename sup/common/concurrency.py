"""Optimistic concurrency: every mutable object carries a `version` (SQLAlchemy's version_id_col).

Clients echo it back as `If-Match: "N"`; a mismatch means somebody else changed the object in
between, and the write is refused instead of silently overwriting their change.
"""

from __future__ import annotations

from sup.errors import PreconditionFailed


def check_version(current: int, expected: int | None, what: str) -> None:
    if expected is not None and expected != current:
        raise PreconditionFailed(
            f"{what} is at version {current}, not {expected}: it was changed since you read it"
        )


def etag(version: int) -> str:
    return f'"{version}"'
