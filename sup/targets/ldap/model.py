"""The values the LDAP target's parts pass around: wanted entries, refusals, observed entries."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

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
    """

    containers: frozenset[str]
    entries: Mapping[str, ObservedEntry]
    foreign: tuple[ObservedEntry, ...]
