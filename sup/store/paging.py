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
    """Rows `offset`..`offset+limit` of `model` matching every condition, and how many match in all."""
    total = session.scalar(select(func.count()).select_from(model).where(*conditions)) or 0
    rows = session.scalars(
        select(model).where(*conditions).options(*options).order_by(order_by).limit(limit).offset(offset)
    )
    return list(rows), total
