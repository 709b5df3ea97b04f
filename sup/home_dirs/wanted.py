"""Who needs a home where (pure): the `passwd` files of SUP's login ConfigMaps -> one wanted
directory per path under the home root, and what is refused.

A passwd line is `name:x:uid:gid:gecos:home:shell` (sup/targets/kube/login_files.py writes them). The
same person is in their own pod's file and in every group pod's file they may log in to: identical
lines count once. Refused, each with the reason (the person gets no directory, nothing is changed):
- a line that is not seven fields with numeric uid and gid, or a home that is not an absolute,
  normalized path (no '..', '.', '//');
- a home not under the home root, or the root itself (it is every home's parent);
- uid 0 (root needs no home here, and one would be root-owned anyway);
- one path wanted by two uids (a home is never handed to another uid);
- one uid wanted at two paths (files disagree during a rename: the next pass, once they agree,
  moves the directory; making the second now would split the person's files);
- a home inside another person's home (its owner could move or replace it).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Rel = tuple[str, ...]  # a home's path under the home root, as components: ("alice",), ("lab", "bob")


@dataclass(frozen=True)
class Person:
    name: str
    uid: int
    gid: int
    home: str


@dataclass(frozen=True)
class Home:
    """A directory to have at `rel` under the mount, owned uid:gid."""

    rel: Rel
    uid: int
    gid: int
    names: tuple[str, ...]  # the people (by name) it is the home of, for the logs

    @property
    def path(self) -> str:
        return "/".join(self.rel)


@dataclass(frozen=True)
class Refusal:
    what: str  # a path under the mount, or where a line came from
    reason: str


def parse_passwd(text: str, source: str) -> tuple[list[Person], list[Refusal]]:
    """The people of one passwd file; `source` (the ConfigMap's name) goes into each refusal."""
    people: list[Person] = []
    refused: list[Refusal] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split(":")
        if len(fields) != 7 or not fields[2].isdigit() or not fields[3].isdigit() or not fields[0]:
            refused.append(
                Refusal(f"{source} line {number}", "not a passwd line name:x:uid:gid:gecos:home:shell")
            )
            continue
        people.append(Person(fields[0], int(fields[2]), int(fields[3]), fields[5]))
    return people, refused


def relative(home: str, home_root: str) -> Rel | str:
    """The home's components under the home root, or why it has none."""
    if not home.startswith("/") or posixpath.normpath(home) != home or "\\" in home:
        return f"home {home!r} is not an absolute, normalized path"
    root = home_root.rstrip("/")
    if not home.startswith(f"{root}/") or home == home_root:
        return f"home {home} is not under the home root {home_root}"
    return tuple(home[len(root) + 1 :].split("/"))


@dataclass
class Wanted:
    homes: dict[Rel, Home] = field(default_factory=dict)  # the homes to have
    refused: list[Refusal] = field(default_factory=list)
    taken: set[Rel] = field(default_factory=set)  # every path somebody wants, refused or not

    @property
    def depth(self) -> int:
        """How deep to look for a renamed person's old directory: as deep as any wanted home, and
        at least 3 (an old home may lie deeper than every current one)."""
        return max([3, *(len(rel) for rel in self.taken)])


def wanted(files: Mapping[str, str], home_root: str) -> Wanted:
    """ConfigMap name -> its passwd text, to the homes to have and the refusals (module docstring)."""
    refused: list[Refusal] = []
    people: set[Person] = set()
    for source in sorted(files):
        found, bad = parse_passwd(files[source], source)
        people.update(found)
        refused.extend(bad)
    by_path: dict[Rel, set[Person]] = {}
    by_uid: dict[int, set[Rel]] = {}
    for person in sorted(people, key=lambda p: (p.name, p.uid, p.home)):
        rel = relative(person.home, home_root)
        if isinstance(rel, str):
            refused.append(Refusal(person.home, f"{person.name}: {rel}; they get no home directory"))
            continue
        if person.uid == 0:
            refused.append(Refusal(person.home, f"{person.name} has uid 0; the maker makes no home for root"))
            continue
        by_path.setdefault(rel, set()).add(person)
        by_uid.setdefault(person.uid, set()).add(rel)
    homes: dict[Rel, Home] = {}
    for rel, owners in by_path.items():
        path = "/".join(rel)
        uids = {p.uid for p in owners}
        names = tuple(sorted({p.name for p in owners}))
        if len(uids) > 1:
            refused.append(
                Refusal(path, f"wanted by {len(uids)} uids ({', '.join(names)}); a home has one owner")
            )
            continue
        (uid,) = uids
        if len(by_uid[uid]) > 1:
            others = ", ".join(sorted("/".join(r) for r in by_uid[uid]))
            refused.append(
                Refusal(
                    path,
                    f"uid {uid} ({', '.join(names)}) is wanted at several homes ({others}); "
                    "waiting until the login files agree",
                )
            )
            continue
        gids = {p.gid for p in owners}
        if len(gids) > 1:
            refused.append(Refusal(path, f"uid {uid} is given several gids ({sorted(gids)})"))
            continue
        homes[rel] = Home(rel, uid, gids.pop(), names)
    for rel in sorted(homes):
        outer = next((rel[:n] for n in range(1, len(rel)) if rel[:n] in by_path), None)
        if outer is not None:
            home = homes.pop(rel)
            refused.append(
                Refusal(
                    home.path,
                    f"{', '.join(home.names)}: the home lies inside the home {'/'.join(outer)} "
                    "of somebody else, who could move or replace it",
                )
            )
    return Wanted(homes, refused, set(by_path))


def people_files(items: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """ConfigMap bodies -> name -> their passwd text (a ConfigMap without one contributes nothing)."""
    found: dict[str, str] = {}
    for item in items:
        name = str((item.get("metadata") or {}).get("name") or "")
        data = item.get("data") or {}
        text = data.get("passwd") if isinstance(data, Mapping) else None
        if name and isinstance(text, str):
            found[name] = text
    return found
