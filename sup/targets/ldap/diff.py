"""Desired state vs one complete read of the directory -> the Changes that make them equal (pure).

- Every wanted entry that is missing is created (with its members, in one write).
- Every attribute SUP owns is compared as a set of values; a difference becomes one `update` with
  {"attr": {"old": ..., "new": ...}}; missing auxiliary object classes are added.
- Group membership is compared value by value; each difference is one `add_members` or
  `remove_members` change whose subject is the user concerned, so per-user status is exact.
- Entries below SUP's OUs that the store does not know are deleted (or reported, by settings).
- An entry SUP wants whose uid, uidNumber, group name or gidNumber is already used by an entry outside
  SUP's OUs is not written: a `report` change with an `error` says why, for that user.

Details (model.py) hold the DN and, for attributes, old and new values: None (absent), a string (one
value) or a list. apply.py performs exactly what they say.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from sup.domain.desired import DesiredState
from sup.targets.base import ADD_MEMBERS, CREATE, DELETE, REMOVE_MEMBERS, REPORT, UPDATE, Change
from sup.targets.ldap import dn as dnlib
from sup.targets.ldap.entries import WantedSet, wanted_entries
from sup.targets.ldap.layout import (
    ENTRY,
    GROUP,
    OU,
    OU_CLASSES,
    SUDO_ROLE,
    USER,
    Layout,
)
from sup.targets.ldap.model import (
    AttributeChange,
    EntryWrite,
    LdapChange,
    LdapDetails,
    MemberAdd,
    MemberRemove,
    NotWritten,
    Observed,
    ObservedEntry,
    Remark,
    Retired,
    Shown,
    Unwanted,
    Wanted,
)

TARGET = "ldap"

_ACTION_ORDER = {CREATE: 0, UPDATE: 1, ADD_MEMBERS: 2, REMOVE_MEMBERS: 3, DELETE: 4, REPORT: 5}
_KIND_ORDER = {OU: 0, USER: 1, SUDO_ROLE: 2, GROUP: 3, ENTRY: 4}


def plan(desired: DesiredState, observed: Observed, layout: Layout) -> list[LdapChange]:
    wanted = wanted_entries(desired, layout)
    changes: list[LdapChange] = []
    for refused in wanted.refused:
        details = NotWritten(refused.dn, refused.error)
        changes.append(Change(TARGET, REPORT, refused.kind, refused.name, details, refused.subject))
    for group in wanted.missing_admin_groups:
        reason = f"admin group {group} is not a group SUP provisions; no sudoRole is written for it"
        changes.append(Change(TARGET, REPORT, SUDO_ROLE, group, Remark(reason)))

    blocked = _collisions(wanted, observed.foreign)
    _withdraw_sudo_of_blocked_groups(wanted, blocked, layout)
    for ndn, error in blocked.items():
        blocked_entry = wanted.entries[ndn]
        details = NotWritten(blocked_entry.dn, error)
        changes.append(
            Change(TARGET, REPORT, blocked_entry.kind, blocked_entry.name, details, blocked_entry.subject)
        )
    frozen_members = _frozen_member_values(wanted, blocked, layout)

    for container in layout.containers:
        if dnlib.normalize(container) not in observed.containers:
            changes.append(_create_ou(container))

    for ndn, entry in wanted.entries.items():
        if ndn in blocked:
            continue
        have = observed.entries.get(ndn)
        if have is None:
            changes.append(_create(entry, layout, frozen_members))
            continue
        update = _attribute_diff(entry, have)
        if update:
            changes.append(
                Change(TARGET, UPDATE, entry.kind, entry.name, EntryWrite(have.dn, update), entry.subject)
            )
        if entry.members is not None:
            changes.extend(_membership_diff(entry, have, layout, frozen_members))

    protected = set(wanted.entries) | {dnlib.normalize(r.dn) for r in wanted.refused}
    for ndn, have in observed.entries.items():
        if ndn in protected:
            continue
        changes.append(_remove(have, wanted.retired.get(ndn), layout))
    return sorted(changes, key=_order)


def dn_of(details: LdapDetails) -> str:
    """The DN a change is about; "" for a remark, which names none."""
    return "" if isinstance(details, Remark) else details.dn


def _order(change: LdapChange) -> tuple[int, int, int, str, str]:
    dn = dn_of(change.details)
    depth = -dn.count(",") if change.action == DELETE else 0  # children before their parents
    return (
        _ACTION_ORDER[change.action],
        depth,
        _KIND_ORDER.get(change.kind, 9),
        dn.lower(),
        str(change.subject),
    )


# --- values as details show them ----------------------------------------------------------------


def shown(values: Iterable[str]) -> Shown:
    """None for no value, the value itself for one, a sorted list for several."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[0] if len(ordered) == 1 else ordered


def values_of(shown_value: Shown) -> list[str]:
    """The inverse of `shown`: the list of values a details entry stands for."""
    if shown_value is None:
        return []
    if isinstance(shown_value, str):
        return [shown_value]
    return list(shown_value)


# --- creates and updates -------------------------------------------------------------------------


def _create_ou(container: str) -> LdapChange:
    ((attribute, value),) = dnlib.first_rdn(container)
    attributes = {
        "objectClass": AttributeChange(None, list(OU_CLASSES)),
        attribute: AttributeChange(None, value),
    }
    return Change(TARGET, CREATE, OU, container, EntryWrite(container, attributes))


def _create(entry: Wanted, layout: Layout, frozen_members: frozenset[str]) -> LdapChange:
    attributes = {"objectClass": AttributeChange(None, list(entry.object_classes))}
    for attribute, values in entry.attributes.items():
        if values:
            attributes[attribute] = AttributeChange(None, shown(values))
    if entry.members is not None:
        members = _target_members(entry.members, (), layout, frozen_members)
        if members:
            attributes[layout.member_attribute] = AttributeChange(None, sorted(members.values()))
    return Change(TARGET, CREATE, entry.kind, entry.name, EntryWrite(entry.dn, attributes), entry.subject)


def _attribute_diff(entry: Wanted, have: ObservedEntry) -> dict[str, AttributeChange]:
    diff: dict[str, AttributeChange] = {}
    present = have.get("objectClass")
    lower = {c.lower() for c in present}
    missing = [c for c in entry.object_classes if c.lower() not in lower]
    if missing:
        diff["objectClass"] = AttributeChange(sorted(present), sorted(present) + missing)
    for attribute, want in entry.attributes.items():
        got = have.get(attribute)
        if got != want and set(got) != set(want):  # values are a set; the order is the server's
            diff[attribute] = AttributeChange(shown(got), shown(want))
    return diff


# --- membership -----------------------------------------------------------------------------------


def _member_key(value: str, layout: Layout) -> str:
    """How two membership values compare: DNs by their normal form, memberUid exactly."""
    if not layout.bis:
        return value
    try:
        return dnlib.normalize(value)
    except dnlib.InvalidDn:
        return value


def _target_members(
    wanted: Iterable[str], have: Iterable[str], layout: Layout, frozen: frozenset[str]
) -> dict[str, str]:
    """The membership values the group must hold (key -> value): the wanted ones that are not frozen,
    the frozen ones it holds already, or the placeholder when that leaves nobody."""
    target = {_member_key(v, layout): v for v in wanted}
    target = {k: v for k, v in target.items() if k not in frozen}
    target.update({k: v for v in have if (k := _member_key(v, layout)) in frozen})
    placeholder = layout.placeholder
    if not target and placeholder is not None:
        target[_member_key(placeholder, layout)] = placeholder
    return target


def _membership_diff(
    entry: Wanted, have: ObservedEntry, layout: Layout, frozen: frozenset[str]
) -> list[LdapChange]:
    attribute = layout.member_attribute
    present = {_member_key(v, layout): v for v in have.get(attribute)}
    target = _target_members(entry.members or (), present.values(), layout, frozen)
    changes: list[LdapChange] = []
    for key in sorted(target.keys() - present.keys()):
        add = MemberAdd(have.dn, attribute, target[key])
        subject = layout.username_of_member(target[key]) if target[key] != layout.placeholder else None
        changes.append(Change(TARGET, ADD_MEMBERS, entry.kind, entry.name, add, subject))
    for key in sorted(present.keys() - target.keys()):
        remove = MemberRemove(have.dn, attribute, present[key])
        subject = layout.username_of_member(present[key]) if present[key] != layout.placeholder else None
        changes.append(Change(TARGET, REMOVE_MEMBERS, entry.kind, entry.name, remove, subject))
    return changes


def _frozen_member_values(wanted: WantedSet, blocked: Mapping[str, str], layout: Layout) -> frozenset[str]:
    """Membership values of users SUP must not write: neither added to nor removed from any group."""
    return frozenset(
        _member_key(layout.member_value(wanted.entries[ndn].name), layout)
        for ndn in blocked
        if wanted.entries[ndn].kind == USER
    )


# --- collisions with entries outside SUP's OUs ---------------------------------------------------


def _collisions(wanted: WantedSet, foreign: Iterable[ObservedEntry]) -> dict[str, str]:
    """Wanted entries (normalized DN -> error) that share a uid, uidNumber, group name or gidNumber
    with an entry outside SUP's OUs. sssd would see two accounts (or groups) for one name or number."""
    taken: dict[tuple[str, str], list[str]] = defaultdict(list)
    for entry in foreign:
        classes = entry.classes
        if "posixaccount" in classes:
            for value in entry.get("uid"):
                taken["uid", value.lower()].append(entry.dn)
            for value in entry.get("uidNumber"):
                taken["uidNumber", value.strip()].append(entry.dn)
        if "posixgroup" in classes:
            for value in entry.get("cn"):
                taken["group name", value.lower()].append(entry.dn)
            for value in entry.get("gidNumber"):
                taken["gidNumber", value.strip()].append(entry.dn)
    if not taken:
        return {}
    blocked: dict[str, str] = {}
    for ndn, item in wanted.entries.items():
        if item.kind == USER:
            keys = [("uid", item.name), ("uidNumber", item.attributes["uidNumber"][0])]
        elif item.kind == GROUP:
            keys = [("group name", item.name), ("gidNumber", item.attributes["gidNumber"][0])]
        else:
            continue
        problems = [
            f"{what} {value} is already used by {', '.join(sorted(taken[what, value.lower()]))}"
            for what, value in keys
            if (what, value.lower()) in taken
        ]
        if problems:
            blocked[ndn] = (
                f"{'; '.join(problems)}, outside SUP's OUs: SUP does not write {item.kind} {item.name} "
                "until that is resolved"
            )
    return blocked


def _withdraw_sudo_of_blocked_groups(wanted: WantedSet, blocked: Mapping[str, str], layout: Layout) -> None:
    """An admin group in a collision loses its sudoRole: `%name` would also grant sudo to the
    members of the foreign group of that name."""
    for name in layout.admin_groups:
        if dnlib.normalize(layout.group_dn(name)) in blocked:
            sudo = dnlib.normalize(layout.sudo_dn(name))
            wanted.entries.pop(sudo, None)
            reason = f"admin group {name} collides with an entry outside SUP's OUs"
            wanted.retired[sudo] = Retired(SUDO_ROLE, name, None, reason)


# --- entries that must go -------------------------------------------------------------------------


def _kind_of(entry: ObservedEntry) -> str:
    classes = entry.classes
    if "posixaccount" in classes:
        return USER
    if "posixgroup" in classes:
        return GROUP
    if "sudorole" in classes:
        return SUDO_ROLE
    if "organizationalunit" in classes:
        return OU
    return ENTRY


def _remove(have: ObservedEntry, retired: Retired | None, layout: Layout) -> LdapChange:
    if retired is not None:
        details = Unwanted(have.dn, retired.reason)
        return Change(TARGET, DELETE, retired.kind, retired.name, details, retired.subject)
    kind = _kind_of(have)
    try:
        name = dnlib.first_rdn(have.dn)[0][1]
    except dnlib.InvalidDn:
        name = have.dn
    uids = have.get("uid")
    subject = uids[0] if kind == USER and uids else None
    if layout.unknown_entries == "report":
        reason = "not in SUP's store; left in place because ldap.unknown_entries is report"
        return Change(TARGET, REPORT, kind, name, Unwanted(have.dn, reason), subject)
    return Change(TARGET, DELETE, kind, name, Unwanted(have.dn, "not in SUP's store"), subject)
