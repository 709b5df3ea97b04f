"""Home directories: where a user's home may be.

A home is written into passwd entries (LDAP `homeDirectory`) and the user's login pod mounts their
home volume at it (and a group's login pod each member's), so a home that is `/`, `/etc`, another
user's home, or that carries control or bidi characters is an attack on the node or on another
person. A home must therefore:

- lie strictly below the home root: the directory part of `accounts.home_template` before
  `{username}` (`/home/{username}` -> `/home`);
- be a plain path: components of letters, digits and `. _ - @ +` only (no empty, `.` or `..`
  component, no trailing `/`), at most 1024 characters;
- belong to one user only (the store checks that; see sup/users/service.py).

The rule is checked when a home is written (created, changed, or moved by a rename); a stored home
that breaks it stays until it changes (README "Home directories").
"""

from __future__ import annotations

import re

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
