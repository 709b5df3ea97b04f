"""Read the directory in bulk: SUP's OUs in full, and the POSIX entries around them for collisions.

Searches, all with constant filters (no value from the store or an identity provider ever reaches a
filter; a pass scoped to a few users reads by name instead, scoped.py), all paged, each result
code checked by LdapConnection.search:
- one subtree search per OU SUP owns (users, groups, sudoers), for the attributes SUP owns;
- the base entry, and a one-level search of each entry on the way from base_dn down to SUP's OUs;
  every other subtree below base_dn gets one subtree search for posixAccount and posixGroup entries.
  So SUP's own entries are read once, and the cost of collision checks grows with the foreign entries,
  not with SUP's.

Every search also asks for entryCSN, the change sequence number OpenLDAP stamps on an entry at each
write. `read_versions` makes the very same searches for entryCSN alone (and hasSubordinates where
the walk needs it): about a third of the time of the full read. Both digest what they saw the same
way, so equal digests mean the same entries at the same versions (unchanged.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from sup.targets.base import ObserveError
from sup.targets.ldap import dn as dnlib
from sup.targets.ldap.connection import LdapConnection
from sup.targets.ldap.layout import GROUP_ATTRIBUTES, SUDO_ATTRIBUTES, USER_ATTRIBUTES, Layout
from sup.targets.ldap.model import Observed, ObservedEntry

EVERYTHING = "(objectClass=*)"
POSIX = "(|(objectClass=posixAccount)(objectClass=posixGroup))"
FOREIGN_ATTRIBUTES = ("objectClass", "uid", "cn", "uidNumber", "gidNumber")
VERSION = "entryCSN"
SUBORDINATES = "hasSubordinates"


class _Reader:
    """The searches of one read, full or versions only, and the digest of every entry they return.

    The digest is None when an entry came without an entryCSN (389 Directory Server keeps none; an
    ACL may hide it; `lastmod off` stops it): such a read cannot vouch that nothing changed."""

    def __init__(self, connection: LdapConnection, *, versions_only: bool) -> None:
        self.connection = connection
        self.versions_only = versions_only
        self._seen: list[str] = []
        self._complete = True

    def search(
        self,
        base: str,
        scope: str,
        search_filter: str,
        attributes: Iterable[str],
        *,
        missing_ok: bool = False,
    ) -> list[ObservedEntry] | None:
        wanted = (VERSION,) if self.versions_only else (*attributes, VERSION)
        if scope == "one":  # the walk decides by hasSubordinates whether to look below a child
            wanted = (*wanted, SUBORDINATES)
        found = self.connection.search(base, scope, search_filter, wanted, missing_ok=missing_ok)
        if found is None:
            self._seen.append(f"{scope}\0{base}\0missing")
            return None
        for entry in found:
            version = entry.get(VERSION)
            if not version:
                self._complete = False
            self._seen.append(f"{scope}\0{entry.dn}\0{version}\0{entry.get(SUBORDINATES)}")
        return found

    def digest(self) -> str | None:
        if not self._complete:
            return None
        hashed = hashlib.sha256()
        for line in sorted(self._seen):
            hashed.update(line.encode("utf-8", "surrogateescape") + b"\n")
        return hashed.hexdigest()


def observe(connection: LdapConnection, layout: Layout) -> Observed:
    reader = _Reader(connection, versions_only=False)
    containers: set[str] = set()
    entries: dict[str, ObservedEntry] = {}
    for container, attributes in _owned_searches(layout).items():
        found = reader.search(container, "sub", EVERYTHING, attributes, missing_ok=True)
        if found is None:
            continue  # the OU does not exist yet: nothing below it either
        own = dnlib.normalize(container)
        for entry in found:
            ndn = dnlib.normalize(entry.dn)
            if ndn == own:
                containers.add(own)
            else:
                entries[ndn] = entry
    foreign = tuple(_foreign_entries(reader, layout))
    return Observed(frozenset(containers), entries, foreign, versions=reader.digest())


def read_versions(connection: LdapConnection, layout: Layout) -> str | None:
    """The digest `observe` would give now, from the same searches for versions alone."""
    reader = _Reader(connection, versions_only=True)
    for container, attributes in _owned_searches(layout).items():
        reader.search(container, "sub", EVERYTHING, attributes, missing_ok=True)
    _foreign_entries(reader, layout)
    return reader.digest()


def _owned_searches(layout: Layout) -> dict[str, tuple[str, ...]]:
    return {
        layout.users_dn: ("objectClass", *USER_ATTRIBUTES),
        layout.groups_dn: ("objectClass", *GROUP_ATTRIBUTES, layout.member_attribute),
        layout.sudoers_dn: ("objectClass", *SUDO_ATTRIBUTES),
    }


def _is_posix(entry: ObservedEntry) -> bool:
    return bool(entry.classes & {"posixaccount", "posixgroup"})


def foreign_entries(connection: LdapConnection, layout: Layout) -> list[ObservedEntry]:
    """POSIX entries below base_dn and outside SUP's OUs, without reading SUP's OUs again."""
    return _foreign_entries(_Reader(connection, versions_only=False), layout)


def _foreign_entries(reader: _Reader, layout: Layout) -> list[ObservedEntry]:
    owned = layout.normalized_containers
    base = reader.search(layout.base_dn, "base", EVERYTHING, FOREIGN_ATTRIBUTES, missing_ok=True)
    if base is None:
        raise ObserveError(f"base_dn {layout.base_dn} does not exist in the directory")
    found = [e for e in base if _is_posix(e)]
    pending = [layout.base_dn]  # entries above one of SUP's OUs: look at their children one by one
    while pending:
        node = pending.pop()
        children = reader.search(node, "one", EVERYTHING, FOREIGN_ATTRIBUTES) or []
        for child in children:
            ndn = dnlib.normalize(child.dn)
            if ndn in owned:
                continue
            if _is_posix(child):
                found.append(child)
            if any(dnlib.is_under(container, ndn) for container in owned):
                pending.append(child.dn)
            elif child.get(SUBORDINATES) != ("FALSE",):
                below = reader.search(child.dn, "sub", POSIX, FOREIGN_ATTRIBUTES) or []
                found.extend(e for e in below if dnlib.normalize(e.dn) != ndn)
    return found
