"""Create-or-update: the one call every source (Keycloak, SCIM, import) makes for a person.

A source says what it knows of a person (`UserInput`: the username it gives them and the fields it
sets); `save_user` works out what differs from the store, applies it through the users service (which
validates, allocates ids, handles renames and suspension, audits and marks the outbox in the caller's
transaction) and answers what changed. Whether a source may write a user at all (ownership, a SCIM
connection's 403, an import's refusal) is the source's question, asked before it calls; taking a user
over is `take_over_user`.

A field's value is validated only when it changes, so a value the store already holds is never
re-judged; an invalid one raises pydantic's ValidationError, which each source reports its own way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy.orm import Session

from sup.config import Settings
from sup.domain.sshkeys import parse_ssh_public_key
from sup.groups import service as groups
from sup.groups.schemas import GroupPatch
from sup.store.audit import Actor, record
from sup.store.models import User
from sup.store.source_columns import SourceColumns, write_source_columns
from sup.users.schemas import UserCreate, UserPatch
from sup.users.service import create_user, default_home, update_user

Action = Literal["created", "updated", "unchanged"]

# Fields that cannot be empty: None from a source means "the configured default" (a SCIM PUT that
# leaves them out resets them).
_DEFAULTED = ("login_shell", "home_directory")


@dataclass(frozen=True)
class UserInput:
    """A source's view of one person.

    `fields` are UserPatch fields the source sets (the others stay as they are); `key_origin` is
    where its SSH keys come from (`admin`, `idp`), and with `keys_of_origin_only` its keys replace
    only those of that origin. With `private_group_gid` other than `refuse`, a `primary_gid` for a
    user with a private group is that group's new gid (an IdP's gidNumber) rather than an error, moved
    before or after the user's other fields (Keycloak moves it first, SCIM last: the audit entries
    each has always written)."""

    username: str
    source: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    key_origin: str = "admin"
    keys_of_origin_only: bool = False
    private_group_gid: Literal["refuse", "first", "last"] = "refuse"
    columns: SourceColumns | None = None


@dataclass(frozen=True)
class UserChange:
    """What `save_user` did: `changed` names the fields it set (created) or that differed (updated)."""

    action: Action
    username: str
    changed: frozenset[str] = frozenset()


def save_user(
    session: Session,
    settings: Settings,
    actor: Actor,
    data: UserInput,
    user: User | None,
    *,
    expected_version: int | None = None,
) -> tuple[User, UserChange]:
    """Create the user (`user` None) or bring `user` to what `data` says. Writes nothing when
    nothing differs (no version bump, no audit entry, no dirty mark)."""
    if user is None:
        spec = UserCreate.model_validate({"username": data.username, **data.fields})
        columns = data.columns.values if data.columns is not None else None
        created = create_user(
            session, settings, actor, spec, data.source, key_origin=data.key_origin, columns=columns
        )
        return created, UserChange("created", created.username, frozenset(spec.model_fields_set))

    changes = differences(settings, user, data)
    private_gid = None
    if data.private_group_gid != "refuse" and user.private_group is not None:
        private_gid = changes.pop("primary_gid", None)
    changed = set(changes)
    if private_gid is not None and data.private_group_gid == "first":
        _move_private_group(session, settings, actor, user, private_gid)
        changed.add("primary_gid")
    if changes:
        update_user(
            session,
            settings,
            actor,
            user.username,
            UserPatch.model_validate(changes),
            expected_version,
            key_origin=data.key_origin,
            keys_of_origin_only=data.keys_of_origin_only,
            writer=data.source,
        )
    if private_gid is not None and data.private_group_gid == "last":
        _move_private_group(session, settings, actor, user, private_gid)
        changed.add("primary_gid")
    if data.columns is not None and write_source_columns(session, actor, "user", user, data.columns):
        changed |= set(data.columns.audited)
    action: Action = "updated" if changed else "unchanged"
    return user, UserChange(action, user.username, frozenset(changed))


def _move_private_group(session: Session, settings: Settings, actor: Actor, user: User, gid: int) -> None:
    assert user.private_group is not None
    patch = GroupPatch.model_validate({"gid_number": gid})
    groups.update_group(session, settings, actor, user.private_group.name, patch)


def differences(settings: Settings, user: User, data: UserInput) -> dict[str, Any]:
    """The fields of `data` that differ from `user` (username included), as a UserPatch's values."""
    changes: dict[str, Any] = {}
    if data.username != user.username:
        changes["username"] = data.username
    for name, value in data.fields.items():
        if name == "ssh_public_keys":
            if _keys_differ(user, value or [], data.key_origin, only_origin=data.keys_of_origin_only):
                changes[name] = value or []
            continue
        if value is None and name in _DEFAULTED:
            value = _default(settings, name, data.username)
        if getattr(user, name) != value:
            changes[name] = value
    return changes


def _default(settings: Settings, name: str, username: str) -> str:
    if name == "login_shell":
        return settings.accounts.default_shell
    return default_home(settings, username)


def _keys_differ(user: User, lines: list[str], origin: str, *, only_origin: bool) -> bool:
    if not only_origin:
        return lines != [key.line for key in user.ssh_keys]
    # The source's own keys, by fingerprint; a key that is already one of another origin stays there.
    given: dict[str, str] = {}
    for line in lines:
        given.setdefault(parse_ssh_public_key(line).fingerprint, line)
    mine = {k.fingerprint: k.line for k in user.ssh_keys if k.origin == origin}
    others = {k.fingerprint for k in user.ssh_keys if k.origin != origin}
    return {f: line for f, line in given.items() if f not in others} != mine


def take_over_user(session: Session, actor: Actor, user: User, source: str, external_id: str | None) -> None:
    """Hand `user` to `source` (as sources.precedence allows: the caller has asked)."""
    before = {"source": user.source, "external_id": user.external_id}
    user.source = source
    user.external_id = external_id
    session.flush()
    record(session, actor, "take_over", "user", user.username, before=before,
           after={"source": source, "external_id": external_id})  # fmt: skip
