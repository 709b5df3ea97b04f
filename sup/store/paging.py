"""One page of a filtered listing, with the total count of matching rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from sup.store.models import Base

M = TypeVar("M", bound=Base)


def fetch_page(
    session: Session,
    model: type[M],
    conditions: Sequence[ColumnElement[bool]],
    order_by: Any,
    limit: int,
    offset: int,
    options: Sequence[Any] = (),
) -> tuple[list[M], int]:
    """Rows `offset`..`offset+limit` of `model` matching every condition, and how many match in all.

    A short page that is not past the end is the last one: its rows tell the total without counting.
    That spares the second scan where no index serves the conditions (a search for a substring) and
    few rows match; a full page, or one past the end, is counted."""
    rows = list(
        session.scalars(
            select(model).where(*conditions).options(*options).order_by(order_by).limit(limit).offset(offset)
        )
    )
    if len(rows) < limit and (rows or offset == 0):
        return rows, offset + len(rows)
    total = session.scalar(select(func.count()).select_from(model).where(*conditions)) or 0
    return rows, total
