"""What to do about each wanted home, given what is on disk (pure; disk.py observes and acts).

Per wanted home, by what its path holds (never through a symlink, disk.py):
- a directory owned by its uid: kept as it is (the person may have changed its mode or group);
- nothing, and exactly one directory of its uid elsewhere that nobody wants any more: MOVED there
  (a rename: the person's files follow their new name); two or more such: refused (which one?);
- nothing else: MADE, owned uid:gid, mode 0700 (missing parents made root-owned 0755);
- an empty root-owned directory (the kubelet makes the subPath of a pod that started first): FIXED
  (chowned to uid:gid, mode 0700), or replaced by the person's old directory when one waits to move;
- a directory of another uid, a root-owned directory that is not empty, a symlink, anything that
  is not a directory, or a path through a symlink or through a directory not owned by root:
  refused (logged, left alone: a home is never handed to another uid, and nothing is followed).
Nothing is ever deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from sup.home_dirs.wanted import Home, Refusal, Rel


class Kind(Enum):
    MISSING = "missing"
    DIR = "directory"
    SYMLINK = "symlink"
    OTHER = "not a directory"
    BLOCKED = "blocked"  # a parent on the way is a symlink, not a directory, or not root's


@dataclass(frozen=True)
class Entry:
    kind: Kind
    uid: int = 0
    gid: int = 0
    empty: bool = False
    why: str = ""  # BLOCKED: which parent and what it is


MISSING = Entry(Kind.MISSING)


@dataclass(frozen=True)
class Move:
    home: Home
    source: Rel


@dataclass
class Plan:
    keep: list[Home] = field(default_factory=list)
    make: list[Home] = field(default_factory=list)
    fix: list[Home] = field(default_factory=list)
    move: list[Move] = field(default_factory=list)
    refuse: list[Refusal] = field(default_factory=list)

    def homes(self) -> list[Home]:
        """Every home that is (or will be, once acted on) its person's: what gets a quota."""
        return [*self.keep, *self.make, *self.fix, *(m.home for m in self.move)]


def needs_orphans(homes: Mapping[Rel, Home], entries: Mapping[Rel, Entry]) -> bool:
    """Whether any home could be a rename's new path (then disk.py scans for old directories)."""
    return any(_vacant(entries.get(rel, MISSING)) for rel in homes)


def _vacant(entry: Entry) -> bool:
    return entry.kind is Kind.MISSING or (entry.kind is Kind.DIR and entry.uid == 0 and entry.empty)


def plan(
    homes: Mapping[Rel, Home],
    entries: Mapping[Rel, Entry],
    orphans: Mapping[int, Sequence[Rel]] | None = None,
) -> Plan:
    """`entries`: what each wanted path holds; `orphans`: uid -> directories owned by that uid at
    paths nobody wants (disk.scan_orphans), for renames."""
    result = Plan()
    orphans = orphans or {}
    for rel in sorted(homes):
        home = homes[rel]
        entry = entries.get(rel, MISSING)
        who = ", ".join(home.names)
        if entry.kind is Kind.DIR and entry.uid == home.uid:
            result.keep.append(home)
            continue
        if not _vacant(entry):
            result.refuse.append(Refusal(home.path, f"{who}: {_why(entry, home)}; left as it is"))
            continue
        sources = [src for src in orphans.get(home.uid, ()) if src != rel[: len(src)]]
        if len(sources) > 1:
            found = ", ".join("/".join(s) for s in sorted(sources))
            result.refuse.append(
                Refusal(
                    home.path,
                    f"{who}: uid {home.uid} owns several directories nobody wants ({found}); "
                    "which one is the home is for an administrator to say (move it there by hand)",
                )
            )
        elif sources:
            result.move.append(Move(home, sources[0]))
        elif entry.kind is Kind.MISSING:
            result.make.append(home)
        else:
            result.fix.append(home)
    return result


def _why(entry: Entry, home: Home) -> str:
    if entry.kind is Kind.DIR and entry.uid == 0:
        return "a root-owned directory that is not empty is there (not handed to a person)"
    if entry.kind is Kind.DIR:
        return (
            f"the directory there is owned by uid {entry.uid}, not {home.uid} (a home is never handed over)"
        )
    if entry.kind is Kind.SYMLINK:
        return "a symlink is there (never followed)"
    if entry.kind is Kind.BLOCKED:
        return entry.why
    return "something that is not a directory is there"
