"""The values the LDAP target's parts pass around: wanted entries, refusals, observed entries, and
the details of the changes a plan holds."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sup.targets.base import Change
from sup.targets.ldap import dn as dnlib


@dataclass(frozen=True)
class Wanted:
    kind: str
    name: str
    dn: str
    subject: str | None
    object_classes: tuple[str, ...]
    attributes: Mapping[str, tuple[str, ...]]
    members: tuple[str, ...] | None = None  # groups: the users' values of layout.member_attribute

    @property
    def ndn(self) -> str:
        return dnlib.normalize(self.dn)


@dataclass(frozen=True)
class Refused:
    """A store object SUP will not write, and why (becomes a `report` change with an error)."""

    kind: str
    name: str
    subject: str | None
    error: str
    dn: str


@dataclass(frozen=True)
class Retired:
    """An entry of an object the store still knows but that must leave the directory."""

    kind: str
    name: str
    subject: str | None
    reason: str


@functools.cache
def _lower(name: str) -> str:
    return name.lower()


@dataclass(frozen=True)
class ObservedEntry:
    """An entry as read: its DN as the server wrote it and its attributes, names lower-cased."""

    dn: str
    attributes: Mapping[str, tuple[str, ...]]

    def get(self, attribute: str) -> tuple[str, ...]:
        return self.attributes.get(_lower(attribute), ())

    @property
    def classes(self) -> frozenset[str]:
        return frozenset(c.lower() for c in self.get("objectClass"))


@dataclass(frozen=True)
class Observed:
    """What one complete read of the directory found.

    `containers`: SUP's OUs that exist (normalized DNs). `entries`: every entry below them, by
    normalized DN. `foreign`: the posixAccount and posixGroup entries outside them, for collisions.
    `versions`: a digest of every entry the read saw and its entryCSN (None if some had none).
    `hollow`: only the versions were read, because they are those of the last full read that
    planned nothing; only LdapTarget.diff takes it, and reads in full if it must plan after all.
    """

    containers: frozenset[str]
    entries: Mapping[str, ObservedEntry]
    foreign: tuple[ObservedEntry, ...]
    versions: str | None = None
    hollow: bool = False


# --- change details: what a plan says and apply.py performs ----------------------------------------

# An attribute's values as details show them: None (absent), a string (one value) or a sorted list.
Shown = str | list[str] | None


@dataclass(frozen=True)
class AttributeChange:
    old: Shown
    new: Shown

    def as_json(self) -> dict[str, Any]:
        return {"old": self.old, "new": self.new}


@dataclass(frozen=True)
class EntryWrite:
    """A `create` (old values None) or an `update` of the attributes SUP owns, in the order shown."""

    dn: str
    attributes: Mapping[str, AttributeChange]

    def as_json(self) -> dict[str, Any]:
        return {"dn": self.dn, **{name: change.as_json() for name, change in self.attributes.items()}}


@dataclass(frozen=True)
class MemberAdd:
    """`add_members`: one value of the group's membership attribute."""

    dn: str
    attribute: str
    value: str

    def as_json(self) -> dict[str, Any]:
        return {"dn": self.dn, self.attribute: {"old": None, "new": self.value}}


@dataclass(frozen=True)
class MemberRemove:
    """`remove_members`: one value of the group's membership attribute."""

    dn: str
    attribute: str
    value: str

    def as_json(self) -> dict[str, Any]:
        return {"dn": self.dn, self.attribute: {"old": self.value, "new": None}}


@dataclass(frozen=True)
class Unwanted:
    """An entry below SUP's OUs to `delete` (or only `report`, by settings), and why."""

    dn: str
    reason: str

    def as_json(self) -> dict[str, Any]:
        return {"dn": self.dn, "reason": self.reason}


@dataclass(frozen=True)
class NotWritten:
    """A `report` of an entry SUP will not write: a failure for its subject."""

    dn: str
    error: str

    def as_json(self) -> dict[str, Any]:
        return {"dn": self.dn, "error": self.error}


@dataclass(frozen=True)
class Remark:
    """A `report` that names no entry and fails nobody (e.g. an admin group SUP does not provision)."""

    reason: str

    def as_json(self) -> dict[str, Any]:
        return {"reason": self.reason}


LdapDetails = EntryWrite | MemberAdd | MemberRemove | Unwanted | NotWritten | Remark
LdapChange = Change[LdapDetails]
