"""A bound SCIM filter as one SQLAlchemy condition, so that filtering, counting and paging happen in
the database (RFC 7644 §3.4.2.2).

scim2-models parses the filter (the whole grammar: `and`, `or`, `not`, grouping, value paths such as
`emails[type eq "work" and value co "@corp"]`, every comparison operator and `pr`) and binds each
attribute path to the schema. `SqlFilter` walks that tree and asks the resource type's
`AttributeMap` where each attribute lives; an attribute the resource type does not have (a search
at the root) matches nothing.
"""

from __future__ import annotations

from typing import Any

from scim2_models import InvalidFilterException, ScimFilter, TooManyException
from scim2_models.path import (
    AttributeBinding,
    AttrPath,
    CompareOperator,
    Comparison,
    FilterVisitor,
    LogicalExpr,
    LogicalOperator,
    Not,
    Present,
    ValuePath,
    coerce_value,
)
from sqlalchemy import and_, false, not_, or_, true

from sup.scim.filtering.attributes import AttributeMap, canonical_sub
from sup.scim.filtering.elements import ElementCondition, SubOperand
from sup.scim.filtering.operands import Condition, Operand, compare

MAX_FILTER_TERMS = 64
"""More comparisons than this in one filter is `tooMany` (RFC 7644 §3.12): more work than SUP does
for one request."""


class SqlFilter(FilterVisitor[Condition]):
    """A bound SCIM filter as one SQLAlchemy condition on its resource type's table."""

    def __init__(self, scim_filter: ScimFilter[Any], attributes: AttributeMap) -> None:
        self.filter = scim_filter
        self.attributes = attributes

    def visit_logical_expr(self, node: LogicalExpr) -> Condition:
        terms = [self.visit(term) for term in node.terms]
        return and_(*terms) if node.op is LogicalOperator.and_ else or_(*terms)

    def visit_not(self, node: Not) -> Condition:
        return not_(self.visit(node.expr))

    def visit_present(self, node: Present) -> Condition:
        binding = self.filter.resolve(node.attr_path, strict=False)
        if binding is None:  # an attribute this resource type does not have (a root search): false
            return false()
        if binding.is_multivalued and binding.sub_field_name:
            # `emails.type pr` means `emails[type pr]` (RFC 7644 §3.4.2.2): some element has one.
            sub = canonical_sub(binding)
            return self._any(binding, lambda operand: _has_value(operand(sub)))
        return self.attributes.present(binding)

    def visit_comparison(self, node: Comparison) -> Condition:
        binding = self.filter.resolve_comparison(node.attr_path, strict=False)
        if binding is None:
            return false()
        value = coerce_value(binding, node.value, node.op)
        special = self.attributes.equals(binding, node.op, value)
        if special is not None:
            return special
        if binding.is_multivalued:
            sub = canonical_sub(binding) if binding.sub_field_name else None
            return self._any(binding, lambda operand: self._compare(operand(sub), node.op, value))
        return self._compare(self.attributes.singular(binding), node.op, value)

    def visit_value_path(self, node: ValuePath) -> Condition:
        binding = self.filter.resolve(node.attr_path, strict=False)
        if binding is None:
            return false()
        inner = _ElementFilter(self, node.attr_path)
        return self._any(binding, lambda operand: inner.condition(node.val_filter, operand))

    def _any(self, binding: AttributeBinding, condition: ElementCondition) -> Condition:
        sources = self.attributes.elements(binding)
        return or_(false(), *(source.any(condition) for source in sources))

    @staticmethod
    def _compare(operand: Operand | None, op: CompareOperator, value: Any) -> Condition:
        if operand is None:  # an attribute SUP never stores: no value
            return true() if op is CompareOperator.ne else false()
        return compare(operand, op, value)


class _ElementFilter:
    """The filter inside a value path, evaluated against one element of the multi-valued attribute."""

    def __init__(self, outer: SqlFilter, attr: AttrPath) -> None:
        self.outer = outer
        self.attr = attr

    def condition(self, node: Any, operand: SubOperand) -> Condition:
        if isinstance(node, LogicalExpr):
            terms = [self.condition(term, operand) for term in node.terms]
            return and_(*terms) if node.op is LogicalOperator.and_ else or_(*terms)
        if isinstance(node, Not):
            return not_(self.condition(node.expr, operand))
        if isinstance(node, Present | Comparison):
            sub_path = AttrPath(attr=self.attr.attr, sub_attr=node.attr_path.attr, uri=self.attr.uri)
            binding = self.outer.filter.resolve_comparison(sub_path)
            assert binding is not None
            assert binding.sub_field_name is not None
            sub = canonical_sub(binding)
            if isinstance(node, Present):
                return _has_value(operand(sub))
            value = coerce_value(binding, node.value, node.op)
            return SqlFilter._compare(operand(sub), node.op, value)
        raise InvalidFilterException(detail="value filters cannot be nested")


def _has_value(operand: Operand | None) -> Condition:
    """`pr` on one element's sub-attribute."""
    return false() if operand is None else operand.expr.is_not(None)


def _count_terms(node: Any) -> int:
    if isinstance(node, LogicalExpr):
        return sum(_count_terms(term) for term in node.terms)
    if isinstance(node, Not):
        return _count_terms(node.expr)
    if isinstance(node, ValuePath):
        return _count_terms(node.val_filter)
    return 1


def condition(scim_filter: ScimFilter[Any], attributes: AttributeMap) -> Condition:
    """The SQL condition of a filter already validated against the resource type's schema."""
    if _count_terms(scim_filter.ast) > MAX_FILTER_TERMS:
        raise TooManyException(
            detail=f"the filter has more than {MAX_FILTER_TERMS} comparisons; split the search"
        )
    return SqlFilter(scim_filter, attributes).visit(scim_filter.ast)
