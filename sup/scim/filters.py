"""SCIM filters and sorting as SQL (RFC 7644 §3.4.2.2, §3.4.2.3).

scim2-models parses a filter (the whole grammar: `and`, `or`, `not`, grouping, value paths such as
`emails[type eq "work" and value co "@corp"]`, every comparison operator and `pr`) and binds each
attribute path to the schema, which gives its type and case sensitivity. `SqlFilter` walks that tree
and builds one SQLAlchemy condition, so that filtering, counting and paging happen in the database:

- attributes kept in columns compare the columns (userName through its indexed comparison key);
- attributes kept as sent (title, phoneNumbers, the enterprise extension, ...) compare JSON values,
  multi-valued ones through an EXISTS over the array's elements (`json_each` on SQLite,
  `jsonb_array_elements` on PostgreSQL);
- `groups`, `members` and `sshPublicKeys` are EXISTS subqueries over memberships and keys.

Strings compare case-insensitively unless the attribute is `caseExact` (RFC 7643 §2.1). Every
condition is two-valued (never SQL NULL), so `not (...)` means what it says: `not (title pr)` matches
users without a title. An absent attribute matches `ne` and nothing else, as RFC 7644 §3.4.2.2 reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scim2_models import InvalidFilterException, InvalidValueException, ScimFilter, TooManyException
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
from sqlalchemy import (
    Boolean,
    ColumnElement,
    String,
    and_,
    cast,
    column,
    exists,
    false,
    func,
    literal,
    not_,
    or_,
    select,
    true,
)
from sqlalchemy.orm import InstrumentedAttribute

from sup.scim.mapping import PRIMARY_EMAIL_KEY, comparison_key, parse_version
from sup.scim.schemas import CORE_GROUP_SCHEMA, CORE_USER_SCHEMA, ENTERPRISE_USER_SCHEMA, SUP_USER_SCHEMA
from sup.store.models import Group, JsonType, Membership, SshKey, User

MAX_FILTER_TERMS = 64
"""More comparisons than this in one filter is `tooMany` (RFC 7644 §3.12): more work than SUP does
for one request."""

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


# --- where attributes live ---------------------------------------------------------------------------


class Elements:
    """The values of a multi-valued attribute: `any(lambda element_operand: condition)`."""

    def any(self, condition: Callable[[Callable[[str | None], Operand | None]], Condition]) -> Condition:
        raise NotImplementedError


def _json_value(expr: ColumnElement[Any], kind: type) -> ColumnElement[Any]:
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


class JsonArray(Elements):
    """The elements of a JSON array kept in a JSON column, e.g. `scim_attributes.phoneNumbers`."""

    def __init__(
        self, column_: InstrumentedAttribute[Any], key: str, dialect: str, typing: SubTyping
    ) -> None:
        self.column = column_
        self.key = key
        self.dialect = dialect
        self.typing = typing

    def any(self, condition: Callable[[Callable[[str | None], Operand | None]], Condition]) -> Condition:
        if self.dialect == "postgresql":
            elements = func.jsonb_array_elements(self.column[self.key])
        else:
            elements = func.json_each(self.column, f'$."{self.key}"')
        table = elements.table_valued(column("value", JsonType)).alias("element")

        def operand(sub: str | None) -> Operand | None:
            if sub is None:
                return None
            kind, case_exact = self.typing(sub)
            return Operand(_json_value(table.c.value[sub], kind), kind, case_exact)

        return exists(select(1).select_from(table).where(condition(operand)))


SubTyping = Callable[[str], tuple[type, bool]]
"""The type and case-exactness of a sub-attribute, by its canonical name."""


class Rows(Elements):
    """Elements that are rows of another table, correlated to the resource (memberships, keys)."""

    def __init__(self, base: Any, where: Sequence[Condition], operands: dict[str | None, Operand]) -> None:
        self.base = base
        self.where = where
        self.operands = operands

    def any(self, condition: Callable[[Callable[[str | None], Operand | None]], Condition]) -> Condition:
        return exists(self.base.where(*self.where, condition(self.operands.get)))


class Synthetic(Elements):
    """One element made of the resource's own columns (the primary email), present when `guard`."""

    def __init__(self, guard: Condition, operands: dict[str | None, Operand]) -> None:
        self.guard = guard
        self.operands = operands

    def any(self, condition: Callable[[Callable[[str | None], Operand | None]], Condition]) -> Condition:
        return and_(self.guard, condition(self.operands.get))


# --- the two resource types ---------------------------------------------------------------------------


def _kind(binding: AttributeBinding) -> type:
    target = binding.target_type
    for kind in (bool, int, float, datetime):
        if isinstance(target, type) and issubclass(target, kind):
            return kind
    return str


def _display(*columns: Expr) -> ColumnElement[Any]:
    return func.coalesce(*columns)


class Target:
    """Where the attributes of one resource type live."""

    core: str

    def __init__(self, dialect: str, scim_filter: ScimFilter[Any] | None) -> None:
        self.dialect = dialect
        self.filter = scim_filter

    def path(self, binding: AttributeBinding) -> str:
        """The binding's attribute as `schema:attr[.sub]`, with the core schema left out."""
        urn = binding.urn
        prefix = self.core + ":"
        return urn[len(prefix) :] if urn.startswith(prefix) else urn

    def singular(self, binding: AttributeBinding) -> Operand | None:
        raise NotImplementedError

    def elements(self, binding: AttributeBinding) -> list[Elements]:
        raise NotImplementedError

    def present(self, binding: AttributeBinding) -> Condition:
        raise NotImplementedError

    def equals(self, binding: AttributeBinding, op: CompareOperator, value: Any) -> Condition | None:
        """A special form of a comparison, or None for the general one."""
        return None

    def sub_typing(self, attr: AttrPath) -> SubTyping:
        """Type a sub-attribute of `attr` (a multi-valued complex attribute) through the schema."""

        def typing(sub: str) -> tuple[type, bool]:
            binding = self._resolve(AttrPath(attr=attr.attr, sub_attr=sub, uri=attr.uri))
            return _kind(binding), binding.case_exact

        return typing

    def _resolve(self, path: AttrPath) -> AttributeBinding:
        assert self.filter is not None
        binding = self.filter.resolve_comparison(path)
        assert binding is not None
        return binding


def _json_path(path: str) -> tuple[str, ...]:
    """`name.middleName` -> ("name", "middleName"); `URN:manager.value` -> (URN, "manager", "value")."""
    if path.startswith("urn:"):
        schema, _, rest = path.rpartition(":")
        return (schema, *rest.split("."))
    return tuple(path.split("."))


class UserTarget(Target):
    core = CORE_USER_SCHEMA
    SUP = SUP_USER_SCHEMA + ":"

    def _columns(self) -> dict[str, Operand]:
        sup = self.SUP
        return {
            "id": Operand(User.scim_id, str, case_exact=True),
            "externalId": Operand(User.external_id, str, case_exact=True),
            "userName": Operand(func.coalesce(User.scim_user_name_key, User.username), str, lowered=True),
            "displayName": Operand(User.display_name, str),
            "name.givenName": Operand(User.given_name, str),
            "name.familyName": Operand(User.family_name, str),
            "active": Operand(User.active, bool),
            "meta.created": Operand(User.created_at, datetime),
            "meta.lastModified": Operand(User.updated_at, datetime),
            "meta.resourceType": Operand(literal("User", String), str, case_exact=True),
            sup + "username": Operand(User.username, str, case_exact=True),
            sup + "uidNumber": Operand(User.uid_number, int),
            sup + "gidNumber": Operand(User.primary_gid, int),
            sup + "loginShell": Operand(User.login_shell, str, case_exact=True),
            sup + "homeDirectory": Operand(User.home_directory, str, case_exact=True),
        }

    def singular(self, binding: AttributeBinding) -> Operand | None:
        path = self.path(binding)
        column_operand = self._columns().get(path)
        if column_operand is not None:
            return column_operand
        if path.startswith(self.SUP) or path.startswith("meta."):
            return None  # e.g. meta.location: computed, never stored
        kind = _kind(binding)
        return Operand(_json_value(User.scim_attributes[_json_path(path)], kind), kind, binding.case_exact)

    def elements(self, binding: AttributeBinding) -> list[Elements]:
        path = self.path(binding).split(".")[0]
        attr = AttrPath(attr=binding.urn.rsplit(":", 1)[-1].split(".")[0])
        if path == "emails":
            typing = self.sub_typing(attr)
            primary = PRIMARY_EMAIL_KEY
            meta = User.scim_attributes
            synthetic = Synthetic(
                User.email.is_not(None),
                {
                    "value": Operand(User.email, str),
                    "type": Operand(meta[(primary, "type")].as_string(), str),
                    "display": Operand(meta[(primary, "display")].as_string(), str),
                    # The store's email is the primary one (mapping.py), whether or not it was marked.
                    "primary": Operand(cast(true(), Boolean), bool),
                },
            )
            return [synthetic, JsonArray(User.scim_attributes, "emails", self.dialect, typing)]
        if path == "groups":
            base = select(1).select_from(Membership).join(Group, Group.id == Membership.group_id)
            return [
                Rows(
                    base,
                    [Membership.user_id == User.id],
                    {
                        "value": Operand(Group.scim_id, str, case_exact=True),
                        "display": Operand(_display(Group.scim_display_name, Group.name), str),
                        "type": Operand(literal("direct", String), str),
                        "ref": Operand(literal("Groups/", String) + Group.scim_id, str, case_exact=True),
                    },
                )
            ]
        if path == self.SUP + "sshPublicKeys":
            line = (
                SshKey.key_type
                + " "
                + SshKey.key_data
                + func.coalesce(func.nullif(" " + SshKey.comment, " "), "")
            )
            return [
                Rows(select(1).select_from(SshKey), [SshKey.user_id == User.id], {None: Operand(line, str)})
            ]
        if path.startswith("urn:"):
            return []  # no other multi-valued extension attribute
        return [JsonArray(User.scim_attributes, path, self.dialect, self.sub_typing(attr))]

    def present(self, binding: AttributeBinding) -> Condition:
        path = self.path(binding)
        if binding.is_multivalued and binding.sub_field_name is None:
            return or_(false(), *(e.any(lambda _operand: true()) for e in self.elements(binding)))
        if path == "name":
            name = User.scim_attributes["name"]
            return or_(
                User.given_name.is_not(None), User.family_name.is_not(None), name.as_string().is_not(None)
            )
        if path == ENTERPRISE_USER_SCHEMA:
            extension: ColumnElement[Any] = User.scim_attributes[path].as_string()
            return extension.is_not(None)
        operand = self.singular(binding)
        if operand is None:
            return true() if path in ("meta", "meta.location", "meta.version") else false()
        if operand.kind is str:
            return and_(operand.expr.is_not(None), operand.expr != "")
        return operand.expr.is_not(None)

    def equals(self, binding: AttributeBinding, op: CompareOperator, value: Any) -> Condition | None:
        """Comparisons with a faster or special form: userName eq (the indexed key), meta.version."""
        path = self.path(binding)
        if path == "userName" and op is CompareOperator.eq and value is not None:
            key = comparison_key(str(value))
            return or_(
                User.scim_user_name_key == key, and_(User.scim_user_name_key.is_(None), User.username == key)
            )
        if path == "meta.version":
            return _version_condition(User.version, op, value)
        return None


class GroupTarget(Target):
    core = CORE_GROUP_SCHEMA

    def _columns(self) -> dict[str, Operand]:
        return {
            "id": Operand(Group.scim_id, str, case_exact=True),
            "externalId": Operand(Group.external_id, str, case_exact=True),
            "displayName": Operand(_display(Group.scim_display_name, Group.name), str),
            "meta.created": Operand(Group.created_at, datetime),
            "meta.lastModified": Operand(Group.updated_at, datetime),
            "meta.resourceType": Operand(literal("Group", String), str, case_exact=True),
        }

    def singular(self, binding: AttributeBinding) -> Operand | None:
        return self._columns().get(self.path(binding))

    def elements(self, binding: AttributeBinding) -> list[Elements]:
        if self.path(binding).split(".")[0] != "members":
            return []
        base = select(1).select_from(Membership).join(User, User.id == Membership.user_id)
        return [
            Rows(
                base,
                [Membership.group_id == Group.id],
                {
                    "value": Operand(User.scim_id, str, case_exact=True),
                    "type": Operand(literal("User", String), str),
                    "ref": Operand(literal("Users/", String) + User.scim_id, str, case_exact=True),
                },
            )
        ]

    def present(self, binding: AttributeBinding) -> Condition:
        if binding.is_multivalued and binding.sub_field_name is None:
            return or_(false(), *(e.any(lambda _operand: true()) for e in self.elements(binding)))
        operand = self.singular(binding)
        if operand is None:
            return true() if self.path(binding).startswith("meta") else false()
        return operand.expr.is_not(None)

    def equals(self, binding: AttributeBinding, op: CompareOperator, value: Any) -> Condition | None:
        if self.path(binding) == "meta.version":
            return _version_condition(Group.version, op, value)
        return None


def _version_condition(version: InstrumentedAttribute[int], op: CompareOperator, value: Any) -> Condition:
    if op not in (CompareOperator.eq, CompareOperator.ne):
        raise InvalidFilterException(detail="meta.version only compares with eq and ne")
    number = parse_version(str(value)) if value is not None else None
    if number is None:
        return false() if op is CompareOperator.eq else true()
    return version == number if op is CompareOperator.eq else version != number


# --- the visitor --------------------------------------------------------------------------------------


class SqlFilter(FilterVisitor[Condition]):
    """A bound SCIM filter as one SQLAlchemy condition on its resource type's table."""

    def __init__(self, scim_filter: ScimFilter[Any], target: Target) -> None:
        self.filter = scim_filter
        self.target = target

    def visit_logical_expr(self, node: LogicalExpr) -> Condition:
        terms = [self.visit(term) for term in node.terms]
        return and_(*terms) if node.op is LogicalOperator.and_ else or_(*terms)

    def visit_not(self, node: Not) -> Condition:
        return not_(self.visit(node.expr))

    def visit_present(self, node: Present) -> Condition:
        binding = self.filter.resolve(node.attr_path, strict=False)
        if binding is None:  # an attribute this resource type does not have (a root search): false
            return false()
        return self.target.present(binding)

    def visit_comparison(self, node: Comparison) -> Condition:
        binding = self.filter.resolve_comparison(node.attr_path, strict=False)
        if binding is None:
            return false()
        value = coerce_value(binding, node.value, node.op)
        special = self.target.equals(binding, node.op, value)
        if special is not None:
            return special
        if binding.is_multivalued:
            sub = _canonical_sub(binding) if binding.sub_field_name else None
            return self._any(binding, lambda operand: self._compare(operand(sub), node.op, value))
        return self._compare(self.target.singular(binding), node.op, value)

    def visit_value_path(self, node: ValuePath) -> Condition:
        binding = self.filter.resolve(node.attr_path, strict=False)
        if binding is None:
            return false()
        inner = _ElementFilter(self, node.attr_path)
        return self._any(binding, lambda operand: inner.condition(node.val_filter, operand))

    def _any(
        self,
        binding: AttributeBinding,
        condition: Callable[[Callable[[str | None], Operand | None]], Condition],
    ) -> Condition:
        sources = self.target.elements(binding)
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

    def condition(self, node: Any, operand: Callable[[str | None], Operand | None]) -> Condition:
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
            sub = _canonical_sub(binding)
            if isinstance(node, Present):
                found = operand(sub)
                return false() if found is None else found.expr.is_not(None)
            value = coerce_value(binding, node.value, node.op)
            return SqlFilter._compare(operand(sub), node.op, value)
        raise InvalidFilterException(detail="value filters cannot be nested")


def _canonical_sub(binding: AttributeBinding) -> str:
    """The sub-attribute's schema name (`$ref` is `ref` in the models and in the operand tables)."""
    return binding.urn.rsplit(".", 1)[-1].lstrip("$")


def _count_terms(node: Any) -> int:
    if isinstance(node, LogicalExpr):
        return sum(_count_terms(term) for term in node.terms)
    if isinstance(node, Not):
        return _count_terms(node.expr)
    if isinstance(node, ValuePath):
        return _count_terms(node.val_filter)
    return 1


def condition(scim_filter: ScimFilter[Any], target: Target) -> Condition:
    """The SQL condition of a filter already validated against the target's schema."""
    if _count_terms(scim_filter.ast) > MAX_FILTER_TERMS:
        raise TooManyException(
            detail=f"the filter has more than {MAX_FILTER_TERMS} comparisons; split the search"
        )
    return SqlFilter(scim_filter, target).visit(scim_filter.ast)


def sort_key(binding: AttributeBinding, target: Target) -> Expr:
    """The SQL expression `sortBy` orders by (RFC 7644 §3.4.2.3); multi-valued: the primary value."""
    path = target.path(binding)
    if isinstance(target, UserTarget) and path.split(".")[0] == "emails":
        return User.email
    if isinstance(target, UserTarget) and path == "userName":
        return func.coalesce(User.scim_user_name_key, User.username)
    if binding.is_multivalued:
        if (
            isinstance(target, UserTarget)
            and not path.startswith("urn:")
            and path.split(".")[0] not in ("groups",)
        ):
            head = path.split(".")[0]
            sub = _canonical_sub(binding) if binding.sub_field_name else "value"
            return User.scim_attributes[(head, 0, sub)].as_string()  # type: ignore[no-any-return]
        raise InvalidValueException(detail=f"cannot sort by {binding.urn}")
    operand = target.singular(binding)
    if operand is None:
        raise InvalidValueException(detail=f"cannot sort by {binding.urn}")
    if operand.kind is str and not operand.case_exact and not operand.lowered:
        return func.lower(operand.expr)
    return operand.expr
