"""Home directories: where a user's home may be.

A home is written into passwd entries (LDAP `homeDirectory`) and the user's login pod mounts their
home volume at it (and a group's login pod each member's), so a home that is `/`, `/etc`, another
user's home, or that carries control or bidi characters is an attack on the node or on another
person. A home must therefore:

- lie strictly below the home root: the directory part of `accounts.home_template` before
  `{username}` (`/home/{username}` -> `/home`);
- be a plain path: components of letters, digits and `. _ - @ +` only (no empty, `.` or `..`
  component, no trailing `/`), at most 1024 characters;
- belong to one user only, and lie neither above nor below another user's home: a group's login pod
  mounts each member's home volume at their home, so bob's home at `/home/alice/.ssh` would be
  mounted over alice's directory, and a home `/home/alice` over everything of a `/home/alice/x`.
  Paths are compared component by component (`/home/al` and `/home/alice` are apart). They are not
  normalised: the plain-path rule above already refuses `//`, `.`, `..` and a trailing `/`, so two
  accepted spellings of one directory cannot exist. (Normalising instead would store what the
  source did not send, and an IdP that reads its value back would rewrite it on every sync.)
  `clash` and `HomeIndex` here decide it; the store asks only for the few homes that can clash
  (sup/users/homes.py).

The rule is checked when a home is written (created, changed, or moved by a rename); a stored home
that breaks it stays until it changes (docs/api.md, "Home directories").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

USERNAME_PLACEHOLDER = "{username}"
MAX_HOME_LENGTH = 1024
_COMPONENT = re.compile(r"[A-Za-z0-9._@+-]+")


class InvalidHome(ValueError):
    """A home directory that breaks the rule; the message says which part."""


def home_root(template: str) -> str:
    """The directory every home lies below: `template` up to the last `/` before `{username}`
    (`/home/{username}` -> `/home`, `/srv/u-{username}/home` -> `/srv`, `/{username}` -> `/`)."""
    head = template.split(USERNAME_PLACEHOLDER, 1)[0]
    root = head[: head.rfind("/")]
    return root or "/"


def check_home(path: str, root: str) -> str:
    """`path` if it is a safe home below `root`; InvalidHome saying why otherwise."""
    if len(path) > MAX_HOME_LENGTH:
        raise InvalidHome(f"is {len(path)} characters long; at most {MAX_HOME_LENGTH}")
    if not path.startswith("/"):
        raise InvalidHome("must be an absolute path")
    if path == "/":
        raise _outside(root)
    parts = path[1:].split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise InvalidHome("must be a plain path: no empty, '.' or '..' component, no trailing '/'")
        if not _COMPONENT.fullmatch(part):
            raise InvalidHome(
                "may contain only letters, digits and '.', '_', '-', '@', '+' between its '/'s "
                "(no spaces, control, bidi or other characters)"
            )
    root_parts = [] if root == "/" else root[1:].split("/")
    if len(parts) <= len(root_parts) or parts[: len(root_parts)] != root_parts:
        raise _outside(root)
    return path


def _outside(root: str) -> InvalidHome:
    return InvalidHome(f"must lie below the home root {root} (accounts.home_template)")


# --- one home per person, none inside another ---------------------------------------------------

Relation = Literal["same", "inside", "contains"]


def ancestors(path: str) -> list[str]:
    """The directories strictly above `path`, the root first: `/home/a/b` -> `/`, `/home`, `/home/a`."""
    parts = path.strip("/").split("/") if path.strip("/") else []
    return ["/"] + ["/" + "/".join(parts[:i]) for i in range(1, len(parts))] if parts else []


def below_prefix(path: str) -> str:
    """What every path strictly below `path` starts with: `/home/a` -> `/home/a/` (`/` -> `/`)."""
    return path if path.endswith("/") else path + "/"


def relation(home: str, other: str) -> Relation | None:
    """How `home` lies against `other`, component by component: the same path, inside it, containing
    it, or apart (None; `/home/al` and `/home/alice` are apart)."""
    if home == other:
        return "same"
    if home.startswith(below_prefix(other)):
        return "inside"
    if other.startswith(below_prefix(home)):
        return "contains"
    return None


@dataclass(frozen=True)
class Clash:
    """`home` cannot be had: `owner` has `their_home`, which is the same, above or below it."""

    home: str
    owner: str
    their_home: str
    relation: Relation

    def message(self) -> str:
        """Names the person: whoever may write a home (an admin, an operator, a SCIM connection, an
        import, the Keycloak pull) can read every user's home anyway."""
        if self.relation == "same":
            return f"{self.home!r} is already used by another user ({self.owner!r})"
        where = "lies inside" if self.relation == "inside" else "contains"
        return (
            f"{self.home!r} {where} the home {self.their_home!r} of user {self.owner!r} "
            "(a group's login pod would mount one over the other)"
        )


def clash(home: str, holders: Iterable[tuple[str, str]], exclude: str | None = None) -> Clash | None:
    """The first of `holders` ((owner, home) pairs; `exclude`'s own left out) whose home is `home`,
    above it or below it; an equal home is reported before a nested one."""
    found: Clash | None = None
    for owner, theirs in holders:
        if owner == exclude:
            continue
        how = relation(home, theirs)
        if how == "same":
            return Clash(home, owner, theirs, how)
        if how is not None and found is None:
            found = Clash(home, owner, theirs, how)
    return found


class HomeIndex:
    """Homes held in memory (a whole import, a batch of new users) for `clash` in O(depth) a home,
    not O(homes): each home is kept under its own path and under every directory above it."""

    def __init__(self, holders: Iterable[tuple[str, str]] = ()) -> None:
        self._at: dict[str, list[str]] = {}  # home -> owners (legacy data may repeat a home)
        self._below: dict[str, list[tuple[str, str]]] = {}  # directory -> (owner, home) under it
        for owner, home in holders:
            self.add(owner, home)

    def add(self, owner: str, home: str) -> None:
        self._at.setdefault(home, []).append(owner)
        for directory in ancestors(home):
            self._below.setdefault(directory, []).append((owner, home))

    def clash(self, home: str, exclude: str | None = None) -> Clash | None:
        """Whether someone but `exclude` holds `home`, a directory above it or a path below it."""
        for owner in self._at.get(home, ()):
            if owner != exclude:
                return Clash(home, owner, home, "same")
        for directory in reversed(ancestors(home)):
            for owner in self._at.get(directory, ()):
                if owner != exclude:
                    return Clash(home, owner, directory, "inside")
        for owner, theirs in self._below.get(home, ()):
            if owner != exclude:
                return Clash(home, owner, theirs, "contains")
        return None
