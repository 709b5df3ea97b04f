"""Read the directory in bulk: SUP's OUs in full, and the POSIX entries around them for collisions.

Searches, all with constant filters (no value from the store or an identity provider ever reaches a
filter; a pass scoped to a few users reads by name instead, scoped.py), all paged, each result
code checked by LdapConnection.search:
- one subtree search per OU SUP owns (users, groups, sudoers), for the attributes SUP owns;
- the base entry, and a one-level search of each entry on the way from base_dn down to SUP's OUs;
  every other subtree below base_dn gets one subtree search for posixAccount and posixGroup entries.
  So SUP's own entries are read once, and the cost of collision checks grows with the foreign entries,
  not with SUP's.
"""

from __future__ import annotations

from sup.targets.base import ObserveError
from sup.targets.ldap import dn as dnlib
from sup.targets.ldap.connection import LdapConnection
from sup.targets.ldap.layout import GROUP_ATTRIBUTES, SUDO_ATTRIBUTES, USER_ATTRIBUTES, Layout
from sup.targets.ldap.model import Observed, ObservedEntry

EVERYTHING = "(objectClass=*)"
POSIX = "(|(objectClass=posixAccount)(objectClass=posixGroup))"
FOREIGN_ATTRIBUTES = ("objectClass", "uid", "cn", "uidNumber", "gidNumber")


def observe(connection: LdapConnection, layout: Layout) -> Observed:
    containers: set[str] = set()
    entries: dict[str, ObservedEntry] = {}
    wanted_attributes = {
        layout.users_dn: ("objectClass", *USER_ATTRIBUTES),
        layout.groups_dn: ("objectClass", *GROUP_ATTRIBUTES, layout.member_attribute),
        layout.sudoers_dn: ("objectClass", *SUDO_ATTRIBUTES),
    }
    for container, attributes in wanted_attributes.items():
        found = connection.search(container, "sub", EVERYTHING, attributes, missing_ok=True)
        if found is None:
            continue  # the OU does not exist yet: nothing below it either
        own = dnlib.normalize(container)
        for entry in found:
            ndn = dnlib.normalize(entry.dn)
            if ndn == own:
                containers.add(own)
            else:
                entries[ndn] = entry
    return Observed(frozenset(containers), entries, tuple(foreign_entries(connection, layout)))


def _is_posix(entry: ObservedEntry) -> bool:
    return bool(entry.classes & {"posixaccount", "posixgroup"})


def foreign_entries(connection: LdapConnection, layout: Layout) -> list[ObservedEntry]:
    """POSIX entries below base_dn and outside SUP's OUs, without reading SUP's OUs again."""
    owned = layout.normalized_containers
    base = connection.search(layout.base_dn, "base", EVERYTHING, FOREIGN_ATTRIBUTES, missing_ok=True)
    if base is None:
        raise ObserveError(f"base_dn {layout.base_dn} does not exist in the directory")
    found = [e for e in base if _is_posix(e)]
    pending = [layout.base_dn]  # entries above one of SUP's OUs: look at their children one by one
    while pending:
        node = pending.pop()
        children = connection.search(node, "one", EVERYTHING, (*FOREIGN_ATTRIBUTES, "hasSubordinates")) or []
        for child in children:
            ndn = dnlib.normalize(child.dn)
            if ndn in owned:
                continue
            if _is_posix(child):
                found.append(child)
            if any(dnlib.is_under(container, ndn) for container in owned):
                pending.append(child.dn)
            elif child.get("hasSubordinates") != ("FALSE",):
                below = connection.search(child.dn, "sub", POSIX, FOREIGN_ATTRIBUTES) or []
                found.extend(e for e in below if dnlib.normalize(e.dn) != ndn)
    return found
