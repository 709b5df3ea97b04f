"""Giving memory back to the system after a full pass (glibc's malloc; elsewhere these do nothing).

A full pass at 50,000 people reads and decodes some hundreds of MiB: LDAP entries, sacctmgr's
output, Kubernetes lists and the plans made from them. Python frees its small objects into arenas it
returns itself, but anything above 512 bytes (response bodies, long strings, lists' arrays) comes
from glibc's malloc, which keeps what is freed in its heaps for the next allocation. Two things make
that cost more than the live data (issue 27: `sup serve` at 1,085 MiB resident with about 200 MiB of
it free space):
- each thread that allocates may get a heap (arena) of its own, up to eight per core: the three
  targets' threads and the API's thread pool spread freed memory over many heaps, none of which can
  be reused by the others; `limit_arenas` caps them at `ARENAS` before any thread starts;
- free space inside a heap stays resident until something calls `malloc_trim`, which releases every
  whole free page (glibc 2.8 and later); `trim` does, after a full pass (not after each small one).

Both are what glibc's own tunables do (`MALLOC_ARENA_MAX`, which wins when set, and `malloc_trim`);
calling them here means the chart, the systemd unit and a shell all get the same behaviour.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from functools import cache

ARENAS = 2
M_ARENA_MAX = -8  # glibc's malloc.h


@cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not hasattr(libc, "malloc_trim") or not hasattr(libc, "mallopt"):
        return None  # not glibc (musl has neither)
    return libc


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap malloc's heaps at `arenas` unless MALLOC_ARENA_MAX says otherwise; call before threads
    start. Returns whether the cap was set."""
    libc = _libc()
    if libc is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, arenas))


def trim() -> None:
    """Return malloc's whole free pages to the system."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
