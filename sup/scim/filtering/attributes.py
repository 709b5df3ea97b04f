"""Where the attributes of each resource type live in SUP's tables, as SQL operands and conditions.

- attributes kept in columns compare the columns (userName through its indexed comparison key);
- attributes kept as sent (title, phoneNumbers, the enterprise extension, ...) compare JSON values,
  multi-valued ones through the elements of the JSON array;
- `groups`, `members` and `sshPublicKeys` are rows of the memberships and keys tables.

An `AttributeMap` answers for one resource type (`UserAttributeMap`, `GroupAttributeMap`); the
filter compiler (compile.py) and `sortBy` (sorting.py) ask it where each bound attribute path lives.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from scim2_models import InvalidFilterException, ScimFilter
from scim2_models.path import AttributeBinding, AttrPath, CompareOperator
from sqlalchemy import Boolean, ColumnElement, String, and_, cast, false, func, literal, or_, select, true
from sqlalchemy.orm import InstrumentedAttribute

from sup.scim.filtering.elements import Elements, JsonArray, Rows, SubTyping, Synthetic
from sup.scim.filtering.operands import Condition, Expr, Operand, json_value
from sup.scim.mapping import PRIMARY_EMAIL_KEY, comparison_key, parse_version
from sup.scim.schemas import CORE_GROUP_SCHEMA, CORE_USER_SCHEMA, ENTERPRISE_USER_SCHEMA, SUP_USER_SCHEMA
from sup.store.models import Group, Membership, SshKey, User


def value_kind(binding: AttributeBinding) -> type:
    """The Python type an attribute's values compare as: bool, int, float, datetime or str."""
    annotation = binding.target_type
    for kind in (bool, int, float, datetime):
        if isinstance(annotation, type) and issubclass(annotation, kind):
            return kind
    return str


def _display(*columns: Expr) -> ColumnElement[Any]:
    return func.coalesce(*columns)


class AttributeMap:
    """Where the attributes of one resource type live in SQL: columns, JSON values, related rows."""

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
            return value_kind(binding), binding.case_exact

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


class UserAttributeMap(AttributeMap):
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
        kind = value_kind(binding)
        return Operand(json_value(User.scim_attributes[_json_path(path)], kind), kind, binding.case_exact)

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
            return user_name_is(comparison_key(str(value)))
        if path == "meta.version":
            return _version_condition(User.version, op, value)
        return None


def user_name_is(key: Any) -> Condition:
    """The users whose userName compares equal to `key` (a `comparison_key`, or a bound parameter
    holding one): the indexed key, or the POSIX username of a user no IdP has named."""
    return or_(User.scim_user_name_key == key, and_(User.scim_user_name_key.is_(None), User.username == key))


class GroupAttributeMap(AttributeMap):
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
                    "display": Operand(_display(User.display_name, User.scim_user_name, User.username), str),
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


def canonical_sub(binding: AttributeBinding) -> str:
    """The sub-attribute's schema name (`$ref` is `ref` in the models and in the operand tables)."""
    return binding.urn.rsplit(".", 1)[-1].lstrip("$")
