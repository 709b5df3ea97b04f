"""The store behind SCIM: scim2-server's storage interface over SUP's services (RFC 7644 §3.3-§3.7).

scim2-server validates each request, applies PUT and PATCH to the current resource (RFC 7644 §3.5) and
checks If-Match; this storage reads resources from the store and writes the result through
sup/users/service.py and sup/groups/service.py, which enforce SUP's rules and, in the same
transaction, write the audit entry and the outbox marks the reconciler works from.

Writes belong to a SCIM connection (the token's name): what a connection creates has source
`scim:NAME`, and a connection may change or delete only its own users and groups unless
`scim.cross_connection_writes` is on (403 otherwise; the resource stays readable, so an IdP that
matched it by userName gets a clear refusal instead of a 404 that would make it create a duplicate).
Likewise a group's members resolve only to the connection's own users (and those already members):
ids of other sources' users are left out, as unknown ids are. A privileged group (an admin or
coordinator group) is created or filled only by the sources `sources.privileged_group_writers`
lists: 403 otherwise (sup/groups/privilege.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from scim2_models import (
    ForbiddenException,
    Group,
    MutabilityException,
    NotFoundException,
    NotImplementedException,
    PreconditionFailedException,
    Resource,
    ResourceType,
    ResponseParameters,
    ScimFilter,
    SearchRequest,
    UniquenessException,
)
from scim2_server.storage import ScimStorage, SearchPage
from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session, joinedload, selectinload

from sup.config import Settings
from sup.domain.groups_flatten import flatten
from sup.domain.posix import InvalidName, check_groupname
from sup.domain.usernames import derive_username
from sup.errors import Conflict, FieldError, InvalidInput
from sup.groups import service as groups
from sup.groups.upsert import GroupInput, save_group
from sup.scim import filtering
from sup.scim.errors import from_exception, scim_attribute
from sup.scim.mapping import (
    GROUP,
    USER,
    GroupWrite,
    UserWrite,
    comparison_key,
    group_display,
    group_resource,
    group_write,
    invalid_values,
    parse_version,
    user_resource,
    user_write,
)
from sup.scim.schemas import ScimUser
from sup.store.audit import Actor
from sup.store.lookup import group_by_name
from sup.store.models import Group as StoreGroup
from sup.store.models import Membership
from sup.store.models import User as StoreUser
from sup.store.source_columns import SourceColumns
from sup.users import service as users
from sup.users.upsert import UserInput, save_user

SOURCE_PREFIX = "scim:"
log = logging.getLogger(__name__)


def connection_source(connection: str) -> str:
    """The `source` of what a SCIM connection (a token named `connection`) creates."""
    return SOURCE_PREFIX + connection


def may_write(settings: Settings, source: str, owner: str) -> bool:
    """Whether the connection of `source` may change what `owner` (a source) holds: only its own,
    unless scim.cross_connection_writes."""
    return owner == source or settings.scim.cross_connection_writes


def _user_options() -> tuple[Any, ...]:
    return (
        selectinload(StoreUser.ssh_keys),
        selectinload(StoreUser.memberships).selectinload(Membership.group),
    )


def lookup_options() -> tuple[Any, ...]:
    """A lookup's users (userName eq, externalId eq): keys and groups in the same round trip, not
    three more queries (1.2-1.6x the requests/s)."""
    return (joinedload(StoreUser.ssh_keys), joinedload(StoreUser.memberships).joinedload(Membership.group))


def _group_options() -> tuple[Any, ...]:
    return (selectinload(StoreGroup.memberships).selectinload(Membership.user),)


class _Query:
    """The matching users or groups of one search, in order."""

    def __init__(self, session: Session, is_user: bool, conditions: list[Any], order: list[Any]) -> None:
        self.session = session
        self.is_user = is_user
        self.model: type[StoreUser] | type[StoreGroup] = StoreUser if is_user else StoreGroup
        self.conditions = conditions
        self.order = [*order, self.model.id]

    def total(self) -> int:
        query = select(func.count()).select_from(self.model).where(*self.conditions)
        return self.session.scalar(query) or 0

    def fetch(self, offset: int, limit: int | None) -> list[Resource[Any]]:
        if self.is_user and (self.conditions or (limit is not None and limit <= 10)):
            options = lookup_options()  # IdPs send lookups with count=100 or none
        else:
            options = _user_options() if self.is_user else _group_options()
        query = select(self.model).where(*self.conditions).order_by(*self.order).offset(offset)
        if limit is not None:
            query = query.limit(limit)
        rows = list(self.session.scalars(query.options(*options)).unique())
        if self.is_user:
            return [user_resource(row) for row in rows]  # type: ignore[arg-type]
        return [group_resource(row) for row in rows]  # type: ignore[arg-type]


class SqlStorage(ScimStorage):
    """One SCIM request's view of the store, inside the request's transaction."""

    def __init__(
        self,
        session: Session,
        settings: Settings,
        actor: Actor,
        connection: str,
        *,
        savepoints: bool = False,
        lock: bool = False,
    ) -> None:
        """`lock`: the request changes the resource it reads (PUT, PATCH, DELETE): on PostgreSQL its
        row is read FOR NO KEY UPDATE, so two requests changing one resource take turns (each
        applies its change to what the other committed) instead of the second failing with 409 at
        its UPDATE. IdPs send a group's member PATCHes side by side, and none sends If-Match. (Not
        FOR UPDATE: that would also hold up a membership's foreign-key check on a user being
        patched.)"""
        self.session = session
        self.lock = lock and session.get_bind().dialect.name == "postgresql"
        self.settings = settings
        self.actor = actor
        self.source = connection_source(connection)
        self.savepoints = savepoints
        self.dialect = session.get_bind().dialect.name
        # Users and groups read in this transaction, by SCIM id: a PATCH reads its resource, then
        # updates it; the second read would run the same queries (keys, members) for the same
        # session object. Not kept across a bulk request's savepoints (a rolled-back one may leave
        # them stale).
        self._read_users: dict[str, StoreUser] = {}
        self._read_groups: dict[str, StoreGroup] = {}

    @contextmanager
    def operation(self) -> Iterator[None]:
        """One SCIM operation: a savepoint per bulk operation, so a failed one leaves the others
        (RFC 7644 §3.7); the services' errors become the SCIM errors they stand for."""
        try:
            if not self.savepoints:
                yield
                return
            with self.session.begin_nested():
                yield
        except Exception as exc:
            converted = from_exception(exc)
            if converted is exc:
                raise
            raise converted from exc

    # --- reads ---------------------------------------------------------------------------------------

    def _user(self, scim_id: str) -> StoreUser:
        known = self._read_users.get(scim_id)
        if known is not None and known in self.session:
            return known
        query = select(StoreUser).where(StoreUser.scim_id == scim_id).options(*_user_options())
        if self.lock:
            query = query.with_for_update(of=StoreUser, key_share=True)
        user = self.session.scalars(query).one_or_none()
        if user is None:
            raise NotFoundException(detail=f"no User with id {scim_id!r}")
        if not self.savepoints:
            self._read_users[scim_id] = user
        return user

    def _group(self, scim_id: str) -> StoreGroup:
        known = self._read_groups.get(scim_id)
        if known is not None and known in self.session:
            return known
        query = (
            select(StoreGroup)
            .where(StoreGroup.scim_id == scim_id, StoreGroup.private_user_id.is_(None))
            .options(*_group_options())
        )
        if self.lock:
            query = query.with_for_update(of=StoreGroup, key_share=True)
        group = self.session.scalars(query).one_or_none()
        if group is None:
            raise NotFoundException(detail=f"no Group with id {scim_id!r}")
        if not self.savepoints:
            self._read_groups[scim_id] = group
        return group

    def get(
        self,
        resource_type: ResourceType,
        resource_id: str,
        *,
        response_parameters: ResponseParameters[Any] | None = None,
    ) -> Resource[Any]:
        if resource_type.name == USER:
            return user_resource(self._user(resource_id))
        return group_resource(self._group(resource_id))

    def search(
        self,
        resource_types: list[ResourceType],
        search_request: SearchRequest[Any],
        *,
        position: Any = None,
    ) -> SearchPage:
        """Filter, sort and page in SQL (RFC 7644 §3.4.2); one COUNT unless the page says it all.

        At the root (several types, RFC 7644 §3.4.2.1) Users come before Groups, each by creation;
        sortBy there is not supported (501).
        """
        offset = (search_request.start_index or 1) - 1
        count = search_request.count
        if len(resource_types) == 1:
            query = self._query(str(resource_types[0].name), search_request)
            return self._page(query, search_request, offset, count)
        if search_request.sort_by is not None:
            raise NotImplementedException(
                detail="sortBy is not supported at the root: search /Users or /Groups"
            )
        total = 0
        resources: list[Resource[Any]] = []
        for resource_type in resource_types:
            query = self._query(str(resource_type.name), search_request)
            matching = query.total()
            skip = max(0, offset - total)
            wanted = None if count is None else max(0, count - len(resources))
            if wanted != 0 and skip < matching:
                resources += query.fetch(skip, wanted)
            total += matching
        return SearchPage(total=total, resources=resources)

    def _query(self, type_name: str, search_request: SearchRequest[Any]) -> _Query:
        is_user = type_name == USER
        model: type[Resource[Any]] = ScimUser if is_user else Group
        scim_filter = search_request.filter
        if scim_filter is not None and len(scim_filter.models) > 1:  # a root search: one type at a time
            scim_filter = ScimFilter[model](str(scim_filter))  # type: ignore[valid-type]
        attributes: filtering.AttributeMap = (
            filtering.UserAttributeMap(self.dialect, scim_filter)
            if is_user
            else filtering.GroupAttributeMap(self.dialect, scim_filter)
        )
        conditions: list[ColumnElement[bool]] = []
        if not is_user:
            conditions.append(StoreGroup.private_user_id.is_(None))
        if scim_filter is not None:
            conditions.append(filtering.condition(scim_filter, attributes))
        order: list[Any] = []
        if search_request.sort_by is not None:
            binding = search_request.sort_by.resolve()
            assert binding is not None  # sortBy was validated against the schema
            key = filtering.sort_key(binding, attributes)
            descending = search_request.sort_order == SearchRequest.SortOrder.descending
            # RFC 7644 §3.4.2.3: resources without the value come last ascending, first descending.
            order.append(key.desc().nulls_first() if descending else key.asc().nulls_last())
        return _Query(self.session, is_user, conditions, order)

    @staticmethod
    def _page(
        query: _Query, search_request: SearchRequest[Any], offset: int, count: int | None
    ) -> SearchPage:
        resources = query.fetch(offset, count) if count != 0 else []
        # A first page that is not full holds every match: no COUNT needed.
        first_page_says_all = bool(count) and offset == 0 and len(resources) < (count or 0)
        total = len(resources) if first_page_says_all else query.total()
        return SearchPage(total=total, resources=resources)

    # --- ownership and versions ---------------------------------------------------------------------

    def _check_writable(self, kind: str, name: str, source: str) -> None:
        if may_write(self.settings, self.source, source):
            return
        raise ForbiddenException(
            detail=f"{kind} {name!r} belongs to source {source!r}, not to this SCIM connection "
            f"({self.source!r}); a connection changes only what it created (setting "
            "scim.cross_connection_writes lifts this)"
        )

    @staticmethod
    def _check_version(current: int, expected: str | None) -> int | None:
        number = parse_version(expected)
        if expected is not None and number != current:
            raise PreconditionFailedException(
                detail=f"the resource is at version {current}, not {expected}: it changed since it was read"
            )
        return number

    # --- users ---------------------------------------------------------------------------------------

    def _derive(self, login: str, holder: StoreUser | None) -> str:
        """The POSIX username for a userName; a name held by another identity is a 409 uniqueness."""
        try:
            username = derive_username(login, self.settings.naming)
        except InvalidName as exc:
            raise InvalidInput(FieldError("userName", str(exc))) from exc
        other = self.session.scalars(select(StoreUser).where(StoreUser.username == username)).one_or_none()
        if other is not None and other is not holder:
            raise UniquenessException(
                detail=f"userName {login!r} maps to the POSIX username {username!r}, which belongs to "
                f"another user (userName {other.scim_user_name or other.username!r}, source "
                f"{other.source!r}); two people cannot share a username. Change the userName, or "
                "SUP's naming rules"
            )
        return username

    def _check_external_id(self, external_id: str | None, source: str, holder: StoreUser | None) -> None:
        if external_id is None:
            return
        other = self.session.scalars(
            select(StoreUser).where(StoreUser.source == source, StoreUser.external_id == external_id)
        ).one_or_none()
        if other is not None and other is not holder:
            raise UniquenessException(
                detail=f"externalId {external_id!r} already identifies user {other.username!r} of this source"
            )

    def create(self, resource_type: ResourceType, resource: Resource[Any]) -> Resource[Any]:
        """POST (RFC 7644 §3.3)."""
        if resource_type.name == GROUP:
            return self._create_group(resource)  # type: ignore[arg-type]
        write = user_write(resource)  # type: ignore[arg-type]
        username = self._derive(write.user_name, None)
        self._check_external_id(write.external_id, self.source, None)
        with invalid_values():
            user, _ = save_user(
                self.session, self.settings, self.actor, self._user_input(write, username), None
            )
        return user_resource(self._reloaded_user(user))

    def _user_input(self, write: UserWrite, username: str) -> UserInput:
        """What the SCIM resource says of the person: every field (a PUT replaces the resource; an
        absent shell or home is the default)."""
        return UserInput(
            username=username,
            source=self.source,
            fields={
                "email": write.email,
                "display_name": write.display_name,
                "given_name": write.given_name,
                "family_name": write.family_name,
                "uid_number": write.uid_number,
                "primary_gid": write.gid_number,
                "login_shell": write.login_shell,
                "home_directory": write.home_directory,
                "ssh_public_keys": write.ssh_public_keys or [],
                "active": write.active,
                "external_id": write.external_id,
            },
            key_origin="idp",
            private_group_gid="last",  # with a private group, gidNumber is that group's gid
            columns=SourceColumns(
                values={
                    "scim_user_name": write.user_name,
                    "scim_user_name_key": comparison_key(write.user_name),
                    "scim_attributes": write.extra or None,
                },
                audited={"scim_user_name": "userName", "scim_attributes": "attributes"},
                action="update_scim",
            ),
        )

    def _reloaded_user(self, user: StoreUser) -> StoreUser:
        scim_id = user.scim_id  # read before the expiry: after it, reading it is a query of its own
        self.session.flush()
        self.session.expire(user)
        self._read_users.pop(scim_id, None)
        return self._user(scim_id)

    def _reloaded_group(self, group: StoreGroup) -> StoreGroup:
        scim_id = group.scim_id
        self.session.flush()
        self.session.expire(group)
        self._read_groups.pop(scim_id, None)
        return self._group(scim_id)

    def update(
        self, resource_type: ResourceType, resource: Resource[Any], *, expected_version: str | None = None
    ) -> Resource[Any]:
        """PUT and PATCH (RFC 7644 §3.5): `resource` is the whole new state."""
        assert resource.id is not None
        if resource_type.name == GROUP:
            return self._update_group(resource, expected_version)  # type: ignore[arg-type]
        user = self._user(resource.id)
        self._check_writable("user", user.username, user.source)
        expected = self._check_version(user.version, expected_version)
        write = user_write(resource)  # type: ignore[arg-type]
        username = user.username
        if write.user_name != (user.scim_user_name or user.username):
            username = self._derive(write.user_name, user)
        self._check_external_id(write.external_id, user.source, user)
        for attribute, value in (("uid_number", write.uid_number), ("primary_gid", write.gid_number)):
            if value is None:
                raise MutabilityException(
                    detail=f"{scim_attribute(attribute)} cannot be removed: every account has one, and "
                    "it never changes by omission"
                )
        with invalid_values():
            save_user(
                self.session,
                self.settings,
                self.actor,
                self._user_input(write, username),
                user,
                expected_version=expected,
            )
        return user_resource(self._reloaded_user(user))

    def delete(
        self, resource_type: ResourceType, resource_id: str, *, expected_version: str | None = None
    ) -> None:
        """DELETE (RFC 7644 §3.6): the user or group leaves the store; uids and gids are never reused."""
        if resource_type.name == GROUP:
            group = self._group(resource_id)
            self._check_writable("group", group.name, group.source)
            expected = self._check_version(group.version, expected_version)
            groups.delete_group(self.session, self.settings, self.actor, group.name, expected)
            self._read_groups.pop(resource_id, None)
            return
        user = self._user(resource_id)
        self._check_writable("user", user.username, user.source)
        expected = self._check_version(user.version, expected_version)
        users.delete_user(self.session, self.actor, user.username, expected)
        self._read_users.pop(resource_id, None)

    # --- groups --------------------------------------------------------------------------------------

    def group_name(self, display_name: str, holder: StoreGroup | None) -> str:
        """The POSIX group name of a displayName (`scim.group_names`); a taken name is a 409."""
        try:
            if self.settings.scim.group_names == "derive":
                name = derive_username(display_name, self.settings.naming, overlong="hash")
            else:
                name = display_name
            check_groupname(name, self.settings.reserved_names())
        except InvalidName as exc:
            raise InvalidInput(FieldError("displayName", str(exc))) from exc
        if holder is not None and name == holder.name:
            return name  # the group keeps its name: nobody else can hold it (names are unique)
        other = group_by_name(self.session, name)
        if other is not None and other is not holder:
            what = "a user's private group" if other.private_user_id is not None else "another group"
            raise UniquenessException(
                detail=f"displayName {display_name!r} maps to the POSIX group name {name!r}, which "
                f"belongs to {what} (displayName {group_display(other)!r}, source {other.source!r})"
            )
        return name

    def _member_names(self, ids: list[str], group: StoreGroup | None) -> tuple[list[str], list[str]]:
        """The usernames of the member ids that name users: this connection's own users (any user with
        scim.cross_connection_writes) and those already members of `group`; other users' ids are left
        out. And the ids that name groups (nested groups: `_members`)."""
        if not ids:
            return [], []
        rows = self.session.execute(
            select(StoreUser.id, StoreUser.scim_id, StoreUser.username, StoreUser.source).where(
                StoreUser.scim_id.in_(ids)
            )
        )
        members = {m.user_id for m in group.memberships} if group is not None else set()
        found: dict[str, str] = {}
        foreign: list[str] = []
        for row in rows:
            if may_write(self.settings, self.source, row.source) or row.id in members:
                found[row.scim_id] = row.username
            else:
                foreign.append(row.scim_id)
        missing = [i for i in ids if i not in found and i not in foreign]
        groups_named = set(self.session.scalars(select(StoreGroup.scim_id).where(
            StoreGroup.scim_id.in_(missing), StoreGroup.private_user_id.is_(None)
        ))) if missing else set()  # fmt: skip
        missing = [i for i in missing if i not in groups_named]
        if missing:
            # RFC 7644 does not make a service provider check members' existence, and IdPs send ids of
            # users they failed to (or chose not to) provision: the others still become members.
            log.warning(
                "SCIM connection %s: %d member id(s) name no user and were left out: %s",
                self.source,
                len(missing),
                ", ".join(repr(i) for i in missing[:10]),
            )
        if foreign:
            # A connection puts only its own users into its groups: another source's user (an
            # operator's, another IdP's) joins only through a source allowed to write that user.
            log.warning(
                "SCIM connection %s: %d member id(s) name users of other sources and were left out "
                "(setting scim.cross_connection_writes lifts this): %s",
                self.source,
                len(foreign),
                ", ".join(repr(i) for i in foreign[:10]),
            )
        return [found[i] for i in ids if i in found], [i for i in ids if i in groups_named]

    def _members(self, write: GroupWrite, group: StoreGroup | None) -> list[str]:
        """The group's members: its member users and, per `scim.nested_groups`, its member groups'
        (refused with a 400, or flattened into their users: sup/domain/groups_flatten.py)."""
        own_id = group.scim_id if group is not None else None
        names, untyped_groups = self._member_names(write.member_ids, group)
        nested = {**write.member_group_ids, **dict.fromkeys(untyped_groups, -1)}
        if not nested:
            return names
        if self.settings.scim.nested_groups == "refuse":
            group_id, index = next(iter(nested.items()))
            raise InvalidInput(
                FieldError(
                    "members" if index < 0 else f"members.{index}",
                    f"member {group_id!r} is a Group: SUP groups hold users, and nested groups are "
                    "refused (setting scim.nested_groups; `flatten` makes the nested group's members "
                    "members of this group)",
                )
            )
        return self._flattened(names, nested, own_id)

    def _flattened(self, names: list[str], nested: dict[str, int], own_id: str | None) -> list[str]:
        """`names` and the members of the groups `nested` names (a stored group holds users only:
        its members are already its effective ones). A group of another source is a 403, as a
        write to it would be: its members are not this connection's to hand out."""
        found = self.session.scalars(
            select(StoreGroup)
            .where(StoreGroup.scim_id.in_(list(nested)), StoreGroup.private_user_id.is_(None))
            .options(*_group_options())
        ).all()
        for group in found:
            if group.scim_id != own_id:
                self._check_writable("group", group.name, group.source)
        unknown = set(nested) - {g.scim_id for g in found}
        if unknown:
            log.warning(
                "SCIM connection %s: %d member group id(s) name no group and were left out: %s",
                self.source,
                len(unknown),
                ", ".join(repr(i) for i in sorted(unknown)[:10]),
            )
        own = own_id or ""
        direct: dict[str, set[str]] = {own: set(names)}
        for group in found:
            if group.scim_id != own:
                direct[group.scim_id] = {m.user.username for m in group.memberships}
        result = flatten(direct, {own: [g.scim_id for g in found]})
        for cycle in result.cycles:
            log.warning("SCIM connection %s: group %r lists itself as a member", self.source, cycle[0])
        return names + sorted(result.members[own] - set(names))

    def _group_input(self, write: GroupWrite, name: str, group: StoreGroup | None) -> GroupInput:
        return GroupInput(
            name=name,
            source=self.source,
            fields={"external_id": write.external_id, "members": self._members(write, group)},
            columns=SourceColumns(
                values={"scim_display_name": write.display_name},
                audited={"scim_display_name": "displayName"},
                action="update_scim",
            ),
        )

    def _create_group(self, resource: Group) -> Resource[Any]:
        write = group_write(resource)
        name = self.group_name(write.display_name, None)
        with invalid_values():
            group, _ = save_group(
                self.session, self.settings, self.actor, self._group_input(write, name, None), None
            )
        return group_resource(self._reloaded_group(group))

    def _update_group(self, resource: Group, expected_version: str | None) -> Resource[Any]:
        assert resource.id is not None
        group = self._group(resource.id)
        self._check_writable("group", group.name, group.source)
        expected = self._check_version(group.version, expected_version)
        write = group_write(resource)
        data = self._group_input(write, self.group_name(write.display_name, group), group)
        try:
            with invalid_values():
                save_group(self.session, self.settings, self.actor, data, group, expected_version=expected)
        except Conflict as exc:
            if exc.field == "name":
                raise UniquenessException(detail=f"displayName: {exc.message}") from exc
            raise
        return group_resource(self._reloaded_group(group))
