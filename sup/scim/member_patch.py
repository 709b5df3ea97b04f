"""The IdPs' member PATCH of a group, on a short path.

Okta, Entra ID, authentik and JumpCloud push a group's membership as PATCHes of `members`: `add`
with a list of `{"value": id}`, `remove` with `members[value eq "id"]` or with a list like `add`'s.
The generic path (scim2-server's handler) reads the whole group as a SCIM resource, applies the
PATCH to it, validates the result, hands the whole new member list to the storage, which compares it
with the stored one, and reads the group again to answer: three reads of every member and two full
validations for one membership (BENCHMARKS.md, "SCIM throughput").

`member_patch_of` recognises exactly those shapes, with no query parameter and no conditional
header; anything else takes the generic path. `answer` then locks the group, resolves the ids in
one query and applies the change as a delta through the groups service (`change_members`: the same
checks, outbox marks and audit entry as the generic path's whole-list update), and answers with the
group as the generic path would: 200 with the resource (RFC 7644 §3.5.2).

A PATCH that changes nothing (an IdP re-sending a membership) is answered without a write, as the
generic path answers it. Whenever the outcome is not a plain success (the group is missing or
another connection's, an id names no user or a user this connection may not add, a `remove` names
someone who is not a member, the group is privileged) nothing is written, and the request takes
the generic path, which gives the answer (and logs the warnings) it always has.
tests/scim/test_member_patch.py holds the two paths' answers and effects equal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_core import from_json
from scim2_server.responses import ScimResponse
from scim2_server.service import is_json_media_type
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from sup.api.context import ApiContext
from sup.errors import SupError
from sup.groups.service import change_members
from sup.scim.mapping import GROUPS_ENDPOINT, group_resource
from sup.scim.service import SupScimService
from sup.scim.storage import connection_source, may_write
from sup.store.models import Group, Membership, User

PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
# More ids than this in one PATCH: the generic path (the short one gains nothing on a bulk change).
MAX_IDS = 1000
_REMOVE_ONE = re.compile(r'members\[value eq "([^"\\\x00-\x1f]+)"\]', re.IGNORECASE)
_CONDITIONS = ("if-match", "if-none-match")


@dataclass(frozen=True)
class Step:
    """One operation: add (or remove) these member ids, in order."""

    add: bool
    ids: tuple[str, ...]


@dataclass(frozen=True)
class MemberPatch:
    steps: tuple[Step, ...]

    @property
    def ids(self) -> set[str]:
        return {i for step in self.steps for i in step.ids}


def member_patch_of(body: bytes, query: Mapping[str, str], headers: Mapping[str, str]) -> MemberPatch | None:
    """The member change a `PATCH /Groups/{id}` asks for, or None when it asks anything else."""
    if query or any(name in headers for name in _CONDITIONS):
        return None
    content_type = headers.get("content-type")
    if content_type and not is_json_media_type(content_type):
        return None
    try:
        payload = from_json(body)
    except ValueError:
        return None
    if not isinstance(payload, dict) or set(payload) != {"schemas", "Operations"}:
        return None
    operations = payload["Operations"]
    if payload["schemas"] != [PATCH_OP] or not isinstance(operations, list) or not operations:
        return None
    steps = [_step(operation) for operation in operations]
    if any(step is None for step in steps):
        return None
    patch = MemberPatch(tuple(s for s in steps if s is not None))
    if sum(len(step.ids) for step in patch.steps) > MAX_IDS:
        return None
    return patch


def _step(operation: Any) -> Step | None:
    if not isinstance(operation, dict) or not set(operation) <= {"op", "path", "value"}:
        return None
    op, path = operation.get("op"), operation.get("path")
    if not isinstance(op, str) or not isinstance(path, str):
        return None
    op = op.lower()
    if op == "remove" and "value" not in operation:
        match = _REMOVE_ONE.fullmatch(path)
        return Step(False, (match.group(1),)) if match else None
    if op not in ("add", "remove") or path.lower() != "members":
        return None
    ids = _member_ids(operation.get("value"), op == "add")
    return None if ids is None else Step(op == "add", ids)


def _member_ids(value: Any, add: bool) -> tuple[str, ...] | None:
    """The ids of a list of `{"value": id}`; None for anything else (a type, a $ref: maybe a nested
    group). An `add` may carry a `display` (ignored, as the generic path ignores it); a `remove` may
    not: the generic path removes only the members equal to what is listed, display included."""
    if not isinstance(value, list) or not value:
        return None
    ids: list[str] = []
    allowed = {"value", "display"} if add else {"value"}
    for member in value:
        if not isinstance(member, dict) or not set(member) <= allowed:
            return None
        member_id, display = member.get("value"), member.get("display", "")
        if not isinstance(member_id, str) or not member_id or not isinstance(display, str):
            return None
        ids.append(member_id)
    if len(set(ids)) != len(ids):
        return None
    return tuple(ids)


class _Generic(Exception):
    """The short path does not decide this request: roll back (nothing was written) and serve it
    the generic way."""


def answer(
    service: SupScimService, ctx: ApiContext, base_url: str, group_id: str, patch: MemberPatch
) -> ScimResponse | None:
    """The response to the member PATCH, or None when the generic path must serve it."""
    with service.provider:
        if service.config.patch is None or not service.config.patch.supported:
            return None
        resource_type = service.resource_type_at(GROUPS_ENDPOINT)
        parameters = service.read_response_parameters(resource_type, {})
        try:
            with ctx.sessions.begin() as session:
                resource = group_resource(_patched(session, ctx, group_id, patch))
        except _Generic:
            return None
        return service.patch_response(base_url, resource, parameters)


def _patched(session: Session, ctx: ApiContext, group_id: str, patch: MemberPatch) -> Group:
    source = connection_source(ctx.actor.name)
    group = _locked_group(session, group_id)
    if group is None or not may_write(ctx.settings, source, group.source):
        raise _Generic
    members = {m.user_id for m in group.memberships}
    users = _users(session, patch.ids)
    for user in users.values():
        if not (may_write(ctx.settings, source, user.source) or user.id in members):
            raise _Generic  # the generic path leaves them out, with a warning
    if len(users) != len(patch.ids):
        raise _Generic  # ids of no user: the generic path leaves them out, or flattens a nested group
    wanted = set(members)
    for step in patch.steps:
        for member_id in step.ids:
            user_id = users[member_id].id
            if step.add:
                wanted.add(user_id)
            elif user_id in wanted:
                wanted.discard(user_id)
            else:
                raise _Generic  # removing a non-member: the generic path decides what that means
    if wanted == members:
        return group  # nothing to change (an IdP re-sending a membership): no write, the same ETag
    by_id = {u.id: u for u in users.values()}
    joining = [by_id[i] for i in sorted(wanted - members)]
    leaving = [by_id[i] for i in sorted(members - wanted)]
    try:
        change_members(session, ctx.settings, ctx.actor, group, joining, leaving, writer=source)
    except SupError as exc:
        raise _Generic from exc  # refused (a privileged group): the generic path's error
    return group


def _locked_group(session: Session, group_id: str) -> Group | None:
    """The group with its members, locked as the generic path locks it (PostgreSQL): concurrent
    member PATCHes of one group take turns instead of one failing on the version.

    The members are read by a second statement, after the lock is held: joined into the first, they
    would come from the snapshot taken before it waited, without what the PATCH it waited for added
    (READ COMMITTED re-reads only the locked row)."""
    query = (
        select(Group)
        .where(Group.scim_id == group_id, Group.private_user_id.is_(None))
        .options(selectinload(Group.memberships).joinedload(Membership.user))
    )
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(of=Group, key_share=True)
    return session.scalars(query).one_or_none()


def _users(session: Session, ids: set[str]) -> dict[str, User]:
    return {u.scim_id: u for u in session.scalars(select(User).where(User.scim_id.in_(ids)))}
