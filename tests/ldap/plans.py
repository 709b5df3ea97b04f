"""Plans without a server: a directory shape, desired states built like the store's, and `simulate`,
which applies a plan's changes to observed entries exactly as their details say."""

from __future__ import annotations

from collections.abc import Mapping

from sup.domain.desired import DesiredState, Policy, StoredGroup, StoredUser, StoreSnapshot, derive
from sup.targets.base import ADD_MEMBERS, CREATE, DELETE, REMOVE_MEMBERS, REPORT, UPDATE
from sup.targets.ldap import dn as dnlib
from sup.targets.ldap.diff import dn_of, values_of
from sup.targets.ldap.layout import Layout
from sup.targets.ldap.model import EntryWrite, LdapChange, MemberAdd, MemberRemove, Observed, ObservedEntry

BASE = "dc=example,dc=org"
PLACEHOLDER = "cn=empty-membership-placeholder"


def layout(**overrides: object) -> Layout:
    values: dict[str, object] = {
        "base_dn": BASE,
        "users_dn": f"ou=people,{BASE}",
        "groups_dn": f"ou=groups,{BASE}",
        "sudoers_dn": f"ou=SUDOers,{BASE}",
        **overrides,
    }
    return Layout(**values)  # type: ignore[arg-type]


EMPTY = Observed(frozenset(), {}, ())


def simulate(observed: Observed, changes: list[LdapChange], shape: Layout) -> Observed:
    """What the directory holds after `changes` were applied as their details say."""
    containers = set(observed.containers)
    entries: dict[str, tuple[str, dict[str, tuple[str, ...]]]] = {
        k: (e.dn, dict(e.attributes)) for k, e in observed.entries.items()
    }
    member = shape.member_attribute.lower()
    for change in changes:
        if change.action == REPORT:
            continue
        details = change.details
        dn = dn_of(details)
        ndn = dnlib.normalize(dn)
        if change.action == CREATE and isinstance(details, EntryWrite):
            created = {
                k.lower(): tuple(vs) for k, v in details.attributes.items() if (vs := values_of(v.new))
            }
            if change.kind == "ou":
                containers.add(ndn)
            else:
                entries[ndn] = (dn, created)
        elif change.action == UPDATE and isinstance(details, EntryWrite):
            current = entries[ndn][1]
            for name, diff in details.attributes.items():
                new = tuple(values_of(diff.new))
                if name == "objectClass":
                    present = current.get("objectclass", ())
                    new = present + tuple(c for c in new if c.lower() not in {p.lower() for p in present})
                if new:
                    current[name.lower()] = new
                else:
                    current.pop(name.lower(), None)
        elif change.action == ADD_MEMBERS and isinstance(details, MemberAdd):
            current = entries[ndn][1]
            current[member] = (*current.get(member, ()), details.value)
        elif change.action == REMOVE_MEMBERS and isinstance(details, MemberRemove):
            current = entries[ndn][1]
            current[member] = tuple(v for v in current.get(member, ()) if v != details.value)
        elif change.action == DELETE:
            del entries[ndn]
        else:
            raise AssertionError(f"{change.action} with {details!r}")
    return Observed(
        frozenset(containers),
        {k: ObservedEntry(dn, attrs) for k, (dn, attrs) in entries.items()},
        observed.foreign,
    )


def user(
    name: str, uid: int, *, active: bool = True, keys: tuple[str, ...] = (), **extra: object
) -> StoredUser:
    values: dict[str, object] = {
        "username": name, "uid_number": uid, "primary_gid": uid, "display_name": None, "given_name": None,
        "family_name": None, "email": None, "login_shell": "/bin/bash", "home_directory": f"/home/{name}",
        "ssh_public_keys": keys, "active": active, "groups": frozenset(), **extra,
    }  # fmt: skip
    return StoredUser(**values)  # type: ignore[arg-type]


def state(
    users: list[StoredUser], groups: Mapping[str, tuple[int, frozenset[str]]], policy: Policy | None = None
) -> DesiredState:
    stored = [StoredGroup(u.username, u.uid_number, None, frozenset(), private_for=u.username) for u in users]
    stored += [StoredGroup(name, gid, None, members, None) for name, (gid, members) in groups.items()]
    return derive(StoreSnapshot(tuple(users), tuple(stored), ()), policy or Policy())
