"""`sortBy` as a SQL expression to order by (RFC 7644 §3.4.2.3)."""

from __future__ import annotations

from scim2_models import InvalidValueException
from scim2_models.path import AttributeBinding
from sqlalchemy import func

from sup.scim.filtering.attributes import AttributeMap, UserAttributeMap, canonical_sub
from sup.scim.filtering.operands import Expr
from sup.store.models import User


def sort_key(binding: AttributeBinding, attributes: AttributeMap) -> Expr:
    """The SQL expression `sortBy` orders by (RFC 7644 §3.4.2.3); multi-valued: the primary value."""
    path = attributes.path(binding)
    if isinstance(attributes, UserAttributeMap) and path.split(".")[0] == "emails":
        return User.email
    if isinstance(attributes, UserAttributeMap) and path == "userName":
        return func.coalesce(User.scim_user_name_key, User.username)
    if binding.is_multivalued:
        if (
            isinstance(attributes, UserAttributeMap)
            and not path.startswith("urn:")
            and path.split(".")[0] not in ("groups",)
        ):
            head = path.split(".")[0]
            sub = canonical_sub(binding) if binding.sub_field_name else "value"
            return User.scim_attributes[(head, 0, sub)].as_string()  # type: ignore[no-any-return]
        raise InvalidValueException(detail=f"cannot sort by {binding.urn}")
    operand = attributes.singular(binding)
    if operand is None:
        raise InvalidValueException(detail=f"cannot sort by {binding.urn}")
    if operand.kind is str and not operand.case_exact and not operand.lowered:
        return func.lower(operand.expr)
    return operand.expr
