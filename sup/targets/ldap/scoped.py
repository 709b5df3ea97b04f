"""A pass the outbox scoped to a few users and groups (push to login): read and plan only those.

Reads (two paged, checked searches below SUP's OUs, plus the collision read of observe.py):
- the users OU, for entries whose uid is one of the scope's users;
- the groups OU, for the groups the scope names (their private groups among them: the outbox names
  a private group with its user) and every group one of the scope's users is a member of now, each
  entry whole, so a membership delta is computed against all of a group's members.
Unlike a full read these filters carry names; each value is escaped (RFC 4515), and they are POSIX
names the store checked anyway.

Plans (`plan_scoped`): the full plan's rules, on the desired state narrowed to what was read, then
only the changes the scope owns:
- create/update/delete of the scope's user entries and of the groups the scope names;
- membership values of the scope's users in any group read (and the placeholder an emptied group
  needs); other members' values are neither added nor removed, whatever their drift;
- nothing is deleted that the scope does not name, and nothing is decided about an entry that was not
  read: a group a scope user should join but the outbox did not name (drift made by hand) waits for
  the full pass, as do sudo roles (the spec does not scope a pass that names an admin group).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ldap3.utils.conv import escape_filter_chars

from sup.domain.desired import DesiredState
from sup.targets.base import ADD_MEMBERS, CREATE, REMOVE_MEMBERS, Scope
from sup.targets.ldap import dn as dnlib
from sup.targets.ldap.connection import LdapConnection
from sup.targets.ldap.diff import dn_of, plan
from sup.targets.ldap.layout import GROUP_ATTRIBUTES, OU, USER_ATTRIBUTES, Layout
from sup.targets.ldap.model import LdapChange, MemberAdd, MemberRemove, Observed, ObservedEntry, Remark
from sup.targets.ldap.observe import foreign_entries


def any_of(pairs: Iterable[tuple[str, str]]) -> str:
    """An OR filter of attribute=value terms, each value escaped."""
    terms = sorted({f"({attribute}={escape_filter_chars(value)})" for attribute, value in pairs})
    return terms[0] if len(terms) == 1 else f"(|{''.join(terms)})"


def observe_scope(connection: LdapConnection, layout: Layout, scope: Scope) -> Observed:
    """The scope's users, the groups it names and the groups its users are members of. An OU that
    was not read (sudoers, or one with no name to look for) counts as present: a scoped pass creates
    no OU but the users' or groups' it found missing."""
    containers = {dnlib.normalize(c) for c in layout.containers}
    entries: dict[str, ObservedEntry] = {}
    reads = []
    if scope.users:
        user_filter = any_of(("uid", user) for user in scope.users)
        reads.append((layout.users_dn, user_filter, ("objectClass", *USER_ATTRIBUTES)))
    group_terms = [("cn", name) for name in (*scope.groups, *scope.users)]
    group_terms += [(layout.member_attribute, layout.member_value(user)) for user in scope.users]
    if group_terms:
        attributes = ("objectClass", *GROUP_ATTRIBUTES, layout.member_attribute)
        reads.append((layout.groups_dn, any_of(group_terms), attributes))
    for container, search_filter, wanted in reads:
        found = connection.search(container, "sub", search_filter, wanted, missing_ok=True)
        if found is None:
            containers.discard(dnlib.normalize(container))
            continue
        own = dnlib.normalize(container)
        for entry in found:
            ndn = dnlib.normalize(entry.dn)
            if ndn != own:
                entries[ndn] = entry
    return Observed(frozenset(containers), entries, tuple(foreign_entries(connection, layout)))


def plan_scoped(desired: DesiredState, observed: Observed, layout: Layout, scope: Scope) -> list[LdapChange]:
    users = {dnlib.normalize(layout.user_dn(name)) for name in scope.users}
    # The groups the scope names, and its users' private groups (named with them as a rule; also
    # when a user's update retires theirs, ldap.deactivated delete).
    private = {n for n in scope.users if n not in desired.groups or desired.groups[n].private}
    named = {dnlib.normalize(layout.group_dn(name)) for name in scope.groups | private}
    groups_dn = dnlib.normalize(layout.groups_dn)
    read = {ndn for ndn in observed.entries if dnlib.is_under(ndn, groups_dn)}
    # The groups named or read, looked up by name: a group entry's RDN is its cn. Not a walk over
    # every desired group (50,000 private groups at 50,000 people: 0.1-0.2 s of every push).
    candidates = scope.groups | private | {cn for ndn in read for cn in _cn_values(observed.entries[ndn])}
    groups = {
        name: desired.groups[name]
        for name in sorted(candidates)
        if name in desired.groups
        and ((ndn := dnlib.normalize(layout.group_dn(name))) in named or ndn in read)
    }
    # The members of every group planned stay users of the narrowed state: a group's wanted member
    # values are computed from them (a member missing there would be a member to remove).
    members = {user for group in groups.values() for user in group.members}
    narrowed = replace(
        desired,
        users={n: desired.users[n] for n in sorted(scope.users | members) if n in desired.users},
        groups=groups,
    )
    # The sudo roles are the full pass's (and the narrowed state would miss admin groups).
    narrowed_layout = replace(layout, admin_groups=())
    owned = users | named
    missing_ous = {
        c for c in (layout.users_dn, layout.groups_dn) if dnlib.normalize(c) not in observed.containers
    }

    def keep(change: LdapChange) -> bool:
        details = change.details
        if isinstance(details, Remark):
            return False
        if change.kind == OU:
            return change.action == CREATE and change.name in missing_ous
        if change.action in (ADD_MEMBERS, REMOVE_MEMBERS):
            assert isinstance(details, (MemberAdd, MemberRemove))
            return change.subject in scope.users or (
                change.subject is None and details.value == layout.placeholder
            )
        return dnlib.normalize(dn_of(details)) in owned

    return [change for change in plan(narrowed, observed, narrowed_layout) if keep(change)]


def _cn_values(entry: ObservedEntry) -> set[str]:
    """The names a group entry may stand for: its cn values as written, and lower-cased (the
    store's names are; DNs compare without case)."""
    values = entry.get("cn")
    return {*values, *(value.lower() for value in values)}
