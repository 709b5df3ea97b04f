"""One SCIM attribute value as SQL, and how it compares (RFC 7644 §3.4.2.2 Table 3).

Strings compare case-insensitively unless the attribute is `caseExact` (RFC 7643 §2.1). Every
condition is two-valued (never SQL NULL), so `not (...)` means what it says, and an absent value
matches `ne` and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scim2_models import InvalidFilterException
from scim2_models.path import CompareOperator
from sqlalchemy import ColumnElement, and_, func, or_
from sqlalchemy.orm import InstrumentedAttribute

from sup.scim.mapping import comparison_key

Condition = ColumnElement[bool]
Expr = ColumnElement[Any] | InstrumentedAttribute[Any]


@dataclass(frozen=True)
class Operand:
    """A SQL expression standing for one SCIM attribute value, with how it compares."""

    expr: Expr
    kind: type  # str, bool, int, float, datetime
    case_exact: bool = False
    lowered: bool = False  # the expression is already a comparison key (NFC, lower case)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def compare(operand: Operand, op: CompareOperator, value: Any) -> Condition:
    """`operand op value` as a two-valued condition (RFC 7644 §3.4.2.2 Table 3)."""
    expr = operand.expr
    if value is None:
        if op is CompareOperator.eq:
            return expr.is_(None)
        if op is CompareOperator.ne:
            return expr.is_not(None)
        raise InvalidFilterException(detail=f"{op.value} cannot compare with null")
    if operand.kind is str:
        value = str(value)
        if not operand.case_exact:
            value = comparison_key(value)
            if not operand.lowered:
                expr = func.lower(expr)
    elif operand.kind is datetime and isinstance(value, str):
        raise InvalidFilterException(detail=f"{value!r} is not a dateTime")
    if op is CompareOperator.ne:
        return or_(operand.expr.is_(None), expr != value)
    if op is CompareOperator.eq:
        condition: Condition = expr == value
    elif op is CompareOperator.co:
        condition = expr.like(f"%{_like_escape(str(value))}%", escape="\\")
    elif op is CompareOperator.sw:
        condition = expr.like(f"{_like_escape(str(value))}%", escape="\\")
    elif op is CompareOperator.ew:
        condition = expr.like(f"%{_like_escape(str(value))}", escape="\\")
    elif op is CompareOperator.gt:
        condition = expr > value
    elif op is CompareOperator.ge:
        condition = expr >= value
    elif op is CompareOperator.lt:
        condition = expr < value
    else:
        condition = expr <= value
    return and_(operand.expr.is_not(None), condition)


def json_value(expr: ColumnElement[Any], kind: type) -> ColumnElement[Any]:
    """A JSON value (an index expression) as SQL of the attribute's type."""
    converted: ColumnElement[Any]
    if kind is bool:
        converted = expr.as_boolean()
    elif kind is int:
        converted = expr.as_integer()
    elif kind is float:
        converted = expr.as_float()
    else:
        converted = expr.as_string()
    return converted
