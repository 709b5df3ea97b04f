"""SCIM resources <-> the store (RFC 7643 §4.1 User, §4.2 Group, §4.3 enterprise extension).

Users:
- `id` is `users.scim_id`, a UUID given at creation that renames keep (RFC 7643 §3.1).
- `userName` is kept as the IdP sent it (`scim_user_name`); the POSIX username is derived from it by
  the `naming` rules (sup/domain/usernames.py). Users the IdP never wrote show their username.
- `externalId`, `displayName`, `name.givenName`, `name.familyName`, `active` are columns.
- `emails`: the primary email (the one marked primary, else the first `work` one, else the first) is
  the store's `email`; the others, and the primary's type and display, are kept beside it.
- The SUP extension is the POSIX account: username (read-only), uidNumber, gidNumber, loginShell,
  homeDirectory, sshPublicKeys.
- Everything else (the other name parts, title, phoneNumbers, addresses, the enterprise extension,
  ...) is kept as sent in `scim_attributes`, so an IdP reads back what it wrote.
- `groups` (read-only) lists the user's ordinary groups.

Groups: `id` is `groups.scim_id`; `displayName` is kept as sent (`scim_display_name`), the POSIX
name is derived from it (`scim.group_names`); `members` are users, by SCIM id; a member Group is
refused or flattened into its users (`scim.nested_groups`). Private groups are not SCIM resources. A
member's `display` is the user's displayName, else their userName (read-only: what an IdP sends there
is not kept).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from scim2_models import Group, Meta

from sup.errors import FieldError, InvalidInput
from sup.scim.schemas import (
    CORE_GROUP_SCHEMA,
    CORE_USER_SCHEMA,
    ENTERPRISE_USER_SCHEMA,
    SUP_USER_SCHEMA,
    ScimUser,
    SupUser,
)
from sup.store.models import Group as StoreGroup
from sup.store.models import User as StoreUser

USER = "User"
GROUP = "Group"
USERS_ENDPOINT = "Users"
GROUPS_ENDPOINT = "Groups"

# Attributes of a User that live in columns, or are computed: never copied into scim_attributes.
_USER_COLUMN_KEYS = frozenset(
    {
        "schemas",
        "id",
        "externalId",
        "userName",
        "displayName",
        "active",
        "meta",
        "groups",
        "password",
        "emails",
        SUP_USER_SCHEMA,
    }
)
_NAME_COLUMN_KEYS = ("givenName", "familyName")
PRIMARY_EMAIL_KEY = "primaryEmail"  # the primary email's type/display/primary flag, beside the others
ACTIVE_UNSET_KEY = "activeUnset"  # the IdP removed `active`: the user stays active, SCIM shows no value
_INTERNAL_KEYS = (PRIMARY_EMAIL_KEY, ACTIVE_UNSET_KEY)

_ETAG = re.compile(r'^(?:W/)?"?(\d{1,18})"?$')


def version_tag(version: int) -> str:
    """meta.version and the ETag header (RFC 7644 §3.14): a weak tag of the row's version."""
    return f'W/"{version}"'


def parse_version(tag: str | None) -> int | None:
    if tag is None:
        return None
    match = _ETAG.fullmatch(tag.strip())
    return int(match.group(1)) if match else None


def comparison_key(value: str) -> str:
    """How userName and other case-insensitive strings compare (RFC 7643 §2.1, `caseExact: false`):
    NFC, then lower case; the same as scim2-models' default comparison."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", value).lower())


@contextmanager
def invalid_values() -> Iterator[None]:
    """SCIM values that break a rule of SUP's request bodies (as the services validate them)
    become InvalidInput, field by field."""
    try:
        yield
    except ValidationError as exc:
        errors = [FieldError(".".join(str(p) for p in e["loc"]) or "body", _message(e)) for e in exc.errors()]
        raise InvalidInput(errors) from None


def _message(error: Any) -> str:
    return re.sub(r"^(Value error|Assertion failed), ", "", str(error.get("msg", "invalid")))


# --- users: store -> SCIM -------------------------------------------------------------------------


def group_display(group: StoreGroup) -> str:
    return group.scim_display_name or group.name


def member_display(user: StoreUser) -> str:
    """A Group member's `display` (RFC 7643 §4.2): the user's displayName, else their userName.

    The first one set, as the filter on `members.display` reads it (COALESCE, sup/scim/filtering)."""
    for name in (user.display_name, user.scim_user_name):
        if name is not None:
            return name
    return user.username


def user_resource(user: StoreUser) -> ScimUser:
    """The SCIM view of a stored user (memberships and keys loaded)."""
    stored: dict[str, Any] = dict(user.scim_attributes or {})
    primary_meta = stored.pop(PRIMARY_EMAIL_KEY, None) or {}
    active_unset = stored.pop(ACTIVE_UNSET_KEY, False) and user.active
    body: dict[str, Any] = {k: v for k, v in stored.items() if k not in _USER_COLUMN_KEYS}
    body.update(id=user.scim_id, userName=user.scim_user_name or user.username)
    if not active_unset:
        body["active"] = user.active
    if user.external_id is not None:
        body["externalId"] = user.external_id
    if user.display_name is not None:
        body["displayName"] = user.display_name
    name = {k: v for k, v in dict(stored.get("name") or {}).items() if k not in _NAME_COLUMN_KEYS}
    if user.given_name is not None:
        name["givenName"] = user.given_name
    if user.family_name is not None:
        name["familyName"] = user.family_name
    if name:
        body["name"] = name
    else:
        body.pop("name", None)
    emails = list(stored.get("emails") or [])
    if user.email is not None:
        emails.insert(0, {**primary_meta, "value": user.email})
    if emails:
        body["emails"] = emails
    groups = sorted(
        (
            {
                "value": m.group.scim_id,
                "display": group_display(m.group),
                "$ref": f"{GROUPS_ENDPOINT}/{m.group.scim_id}",
                "type": "direct",
            }
            for m in user.memberships
        ),
        key=lambda g: g["display"],
    )
    if groups:
        body["groups"] = groups
    posix: dict[str, Any] = {
        "username": user.username,
        "uidNumber": user.uid_number,
        "gidNumber": user.primary_gid,
        "loginShell": user.login_shell,
        "homeDirectory": user.home_directory,
    }
    keys = [key.line for key in user.ssh_keys]
    if keys:
        posix["sshPublicKeys"] = keys
    body[SUP_USER_SCHEMA] = posix
    schemas = [CORE_USER_SCHEMA, SUP_USER_SCHEMA]
    if ENTERPRISE_USER_SCHEMA in body:
        schemas.insert(1, ENTERPRISE_USER_SCHEMA)
    body["schemas"] = schemas
    resource = ScimUser.model_validate(body)
    resource.meta = Meta(
        resource_type=USER,
        created=user.created_at,
        last_modified=user.updated_at,
        version=version_tag(user.version),
    )
    return resource


# --- users: SCIM -> store -------------------------------------------------------------------------


@dataclass
class UserWrite:
    """What a SCIM User resource asks of the store."""

    user_name: str
    external_id: str | None
    active: bool
    display_name: str | None
    given_name: str | None
    family_name: str | None
    email: str | None
    # The SUP extension. None: not given (POST: defaults; PUT: kept, see storage.py).
    uid_number: int | None
    gid_number: int | None
    login_shell: str | None
    home_directory: str | None
    ssh_public_keys: list[str] | None
    extra: dict[str, Any] = field(default_factory=dict)


def _primary_index(emails: list[dict[str, Any]]) -> int | None:
    with_value = [i for i, e in enumerate(emails) if e.get("value")]
    if not with_value:
        return None
    for i in with_value:
        if emails[i].get("primary") is True:
            return i
    for i in with_value:
        if str(emails[i].get("type") or "").lower() == "work":
            return i
    return with_value[0]


def user_write(resource: ScimUser) -> UserWrite:
    """Split a validated SCIM User into store columns and the attributes kept as sent."""
    dumped: dict[str, Any] = resource.model_dump(mode="json")
    extra = {k: v for k, v in dumped.items() if k not in _USER_COLUMN_KEYS}
    name = dict(extra.pop("name", None) or {})
    given, family = name.pop("givenName", None), name.pop("familyName", None)
    if name:
        extra["name"] = name
    emails = [dict(e) for e in dumped.get("emails") or []]
    primary = _primary_index(emails)
    email: str | None = None
    if primary is not None:
        chosen = emails.pop(primary)
        email = chosen.pop("value")
        if chosen:
            extra[PRIMARY_EMAIL_KEY] = chosen
    if emails:
        extra["emails"] = emails
    if resource.active is None:
        extra[ACTIVE_UNSET_KEY] = True
    posix: SupUser | None = resource[SupUser]
    if not resource.user_name:
        raise InvalidInput(FieldError("userName", "required"))
    return UserWrite(
        user_name=resource.user_name,
        external_id=resource.external_id,
        active=resource.active if resource.active is not None else True,
        display_name=resource.display_name,
        given_name=given,
        family_name=family,
        email=email,
        uid_number=posix.uid_number if posix else None,
        gid_number=posix.gid_number if posix else None,
        login_shell=posix.login_shell if posix else None,
        home_directory=posix.home_directory if posix else None,
        ssh_public_keys=list(posix.ssh_public_keys) if posix and posix.ssh_public_keys is not None else None,
        extra=extra,
    )


# --- groups ----------------------------------------------------------------------------------------


def group_resource(group: StoreGroup) -> Group:
    """The SCIM view of a stored group (memberships and their users loaded)."""
    members = sorted(
        (
            {
                "value": m.user.scim_id,
                "display": member_display(m.user),
                "$ref": f"{USERS_ENDPOINT}/{m.user.scim_id}",
                "type": "User",
            }
            for m in group.memberships
        ),
        key=lambda m: m["value"],
    )
    body: dict[str, Any] = {
        "schemas": [CORE_GROUP_SCHEMA],
        "id": group.scim_id,
        "displayName": group_display(group),
    }
    if group.external_id is not None:
        body["externalId"] = group.external_id
    if members:
        body["members"] = members
    resource = Group.model_validate(body)
    resource.meta = Meta(
        resource_type=GROUP,
        created=group.created_at,
        last_modified=group.updated_at,
        version=version_tag(group.version),
    )
    return resource


@dataclass
class GroupWrite:
    display_name: str
    external_id: str | None
    member_ids: list[str]
    # Members that are Groups (type "Group", or a $ref to .../Groups/ID), by SCIM id, and the index
    # each came at; `scim.nested_groups` decides what becomes of them (sup/scim/storage.py).
    member_group_ids: dict[str, int] = field(default_factory=dict)


def group_write(resource: Group) -> GroupWrite:
    """A validated SCIM Group as what it asks of the store: member Users and member Groups by SCIM id
    (RFC 7643 §4.2: `type` is "User" or "Group"; without one, a `$ref` says which)."""
    if not resource.display_name:
        raise InvalidInput(FieldError("displayName", "required"))
    ids: list[str] = []
    group_ids: dict[str, int] = {}
    for index, member in enumerate(resource.members or []):
        kind = _member_kind(member.type, member.ref)
        if kind not in ("user", "group"):
            raise InvalidInput(
                FieldError(f"members.{index}", f"a member is a User or a Group, not {str(member.type)!r}")
            )
        if not member.value:
            raise InvalidInput(FieldError(f"members.{index}", "value (the member's id) is required"))
        if kind == "group":
            group_ids.setdefault(member.value, index)
        elif member.value not in ids:
            ids.append(member.value)
    return GroupWrite(
        display_name=resource.display_name,
        external_id=resource.external_id,
        member_ids=ids,
        member_group_ids=group_ids,
    )


def _member_kind(kind: str | None, ref: object) -> str:
    if kind is not None:
        return str(kind).lower()
    if ref is not None and re.search(r"/Groups/[^/]+/?$", str(ref)):
        return "group"
    return "user"
