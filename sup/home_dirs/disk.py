"""The syscalls: what each wanted path holds, and making, fixing and moving directories, never
following a symlink.

Every path is walked one component at a time from a descriptor of the mount: each parent is opened
with O_NOFOLLOW | O_DIRECTORY relative to the one before (a symlink anywhere fails the open with
ELOOP or ENOTDIR instead of being followed), and must be owned by root, so no person can move or
swap it while the maker works. The last component is read with lstat relative to its parent, a
directory is changed only through a descriptor opened the same way (fchown, fchmod: the inode
checked is the inode changed), and renames name both ends relative to parents opened so.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager

from sup.home_dirs.plan import MISSING, Entry, Kind
from sup.home_dirs.wanted import Home, Rel

log = logging.getLogger("sup.home_dirs")

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
HOME_MODE = 0o700
PARENT_MODE = 0o755


class Refused(Exception):
    """What is on disk differs from what the plan saw, in a way that makes the step unsafe."""


@contextmanager
def opened(parent: int, name: str) -> Iterator[int]:
    fd = os.open(name, DIR_FLAGS, dir_fd=parent)
    try:
        yield fd
    finally:
        os.close(fd)


def _parent(root: int, parts: Rel, *, make: bool) -> int:
    """A descriptor of the directory holding the last of `parts` (the caller closes it); each
    parent root-owned, made root-owned 0755 when missing and `make`. Raises Refused or OSError."""
    fd = os.dup(root)
    try:
        for depth, name in enumerate(parts[:-1]):
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not make:
                    raise
                os.mkdir(name, PARENT_MODE, dir_fd=fd)
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
                os.fchmod(child, PARENT_MODE)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise Refused(
                        f"{'/'.join(parts[: depth + 1])} is not a directory (or a symlink)"
                    ) from None
                raise
            os.close(fd)
            fd = child
            if os.fstat(fd).st_uid != 0:
                raise Refused(f"the parent {'/'.join(parts[: depth + 1])} is not owned by root")
        return fd
    except BaseException:
        os.close(fd)
        raise


def observe(root: int, rels: Sequence[Rel]) -> dict[Rel, Entry]:
    """What each path holds (plan.Entry)."""
    found: dict[Rel, Entry] = {}
    for rel in rels:
        try:
            parent = _parent(root, rel, make=False)
        except FileNotFoundError:
            found[rel] = MISSING
            continue
        except Refused as exc:
            found[rel] = Entry(Kind.BLOCKED, why=str(exc))
            continue
        try:
            found[rel] = _entry(parent, rel[-1])
        finally:
            os.close(parent)
    return found


def _entry(parent: int, name: str) -> Entry:
    try:
        info = os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        return MISSING
    if stat.S_ISLNK(info.st_mode):
        return Entry(Kind.SYMLINK, info.st_uid, info.st_gid)
    if not stat.S_ISDIR(info.st_mode):
        return Entry(Kind.OTHER, info.st_uid, info.st_gid)
    empty = False
    if info.st_uid == 0:
        with opened(parent, name) as fd:
            empty = not os.listdir(fd)
    return Entry(Kind.DIR, info.st_uid, info.st_gid, empty)


def scan_orphans(root: int, wanted: Collection[Rel], depth: int) -> dict[int, list[Rel]]:
    """uid -> the directories owned by that uid (not root) at paths nobody wants, up to `depth`
    components deep, descending only through root-owned directories that are not wanted homes."""
    found: dict[int, list[Rel]] = {}

    def walk(fd: int, prefix: Rel) -> None:
        for name in sorted(os.listdir(fd)):
            rel = (*prefix, name)
            try:
                info = os.lstat(name, dir_fd=fd)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(info.st_mode) or rel in wanted:
                continue
            if info.st_uid != 0:
                found.setdefault(info.st_uid, []).append(rel)
            elif len(rel) < depth:
                try:
                    with opened(fd, name) as child:
                        walk(child, rel)
                except OSError:  # gone or swapped meanwhile: not a candidate
                    continue

    walk(root, ())
    return found


def make(root: int, home: Home) -> None:
    """mkdir uid:gid 0700 (missing parents root 0755)."""
    parent = _parent(root, home.rel, make=True)
    try:
        os.mkdir(home.rel[-1], HOME_MODE, dir_fd=parent)
        with opened(parent, home.rel[-1]) as fd:
            os.fchown(fd, home.uid, home.gid)
            os.fchmod(fd, HOME_MODE)
    finally:
        os.close(parent)


def fix(root: int, home: Home) -> None:
    """Hand an empty root-owned directory (the kubelet's) to its person: uid:gid 0700."""
    parent = _parent(root, home.rel, make=False)
    try:
        with opened(parent, home.rel[-1]) as fd:
            info = os.fstat(fd)
            if info.st_uid != 0 or os.listdir(fd):
                raise Refused("it is no longer an empty root-owned directory")
            os.fchown(fd, home.uid, home.gid)
            os.fchmod(fd, HOME_MODE)
    finally:
        os.close(parent)


def move(root: int, home: Home, source: Rel) -> None:
    """Rename the person's old directory to their home's path (over an empty directory the kubelet
    made there, which rename(2) replaces only when empty)."""
    old_parent = _parent(root, source, make=False)
    try:
        with opened(old_parent, source[-1]) as fd:
            if os.fstat(fd).st_uid != home.uid:
                raise Refused(f"{'/'.join(source)} is no longer owned by uid {home.uid}")
        new_parent = _parent(root, home.rel, make=True)
        try:
            os.rename(source[-1], home.rel[-1], src_dir_fd=old_parent, dst_dir_fd=new_parent)
        finally:
            os.close(new_parent)
    finally:
        os.close(old_parent)


@contextmanager
def mount_fd(path: str) -> Iterator[int]:
    """The mount's directory (followed: it is the maker's own setting, not a person's path)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)
