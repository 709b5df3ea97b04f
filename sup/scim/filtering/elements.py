"""The values of a multi-valued attribute, wherever they are kept: a filter on them is an EXISTS.

A multi-valued attribute may be spread over several places (the primary email is a column, the
others a JSON array), so an attribute map returns a list of `Elements`; a condition holds when it
holds for any element of any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import and_, column, exists, func, select
from sqlalchemy.orm import InstrumentedAttribute

from sup.scim.filtering.operands import Condition, Operand, json_value
from sup.store.models import JsonType

SubOperand = Callable[[str | None], Operand | None]
"""One element's sub-attribute (None: the element itself, for simple multi-valued attributes) as an
operand, or None when SUP keeps no such value."""

ElementCondition = Callable[[SubOperand], Condition]
"""A condition on one element, built from that element's operands."""

SubTyping = Callable[[str], tuple[type, bool]]
"""The type and case-exactness of a sub-attribute, by its canonical name."""


class Elements:
    """The values of a multi-valued attribute: `any(lambda element_operand: condition)`."""

    def any(self, condition: ElementCondition) -> Condition:
        raise NotImplementedError


class JsonArray(Elements):
    """The elements of a JSON array kept in a JSON column, e.g. `scim_attributes.phoneNumbers`."""

    def __init__(
        self, column_: InstrumentedAttribute[Any], key: str, dialect: str, typing: SubTyping
    ) -> None:
        self.column = column_
        self.key = key
        self.dialect = dialect
        self.typing = typing

    def any(self, condition: ElementCondition) -> Condition:
        if self.dialect == "postgresql":
            elements = func.jsonb_array_elements(self.column[self.key])
        else:
            elements = func.json_each(self.column, f'$."{self.key}"')
        table = elements.table_valued(column("value", JsonType)).alias("element")

        def operand(sub: str | None) -> Operand | None:
            if sub is None:
                return None
            kind, case_exact = self.typing(sub)
            return Operand(json_value(table.c.value[sub], kind), kind, case_exact)

        return exists(select(1).select_from(table).where(condition(operand)))


class Rows(Elements):
    """Elements that are rows of another table, correlated to the resource (memberships, keys)."""

    def __init__(self, base: Any, where: Sequence[Condition], operands: dict[str | None, Operand]) -> None:
        self.base = base
        self.where = where
        self.operands = operands

    def any(self, condition: ElementCondition) -> Condition:
        return exists(self.base.where(*self.where, condition(self.operands.get)))


class Synthetic(Elements):
    """One element made of the resource's own columns (the primary email), present when `guard`."""

    def __init__(self, guard: Condition, operands: dict[str | None, Operand]) -> None:
        self.guard = guard
        self.operands = operands

    def any(self, condition: ElementCondition) -> Condition:
        return and_(self.guard, condition(self.operands.get))
