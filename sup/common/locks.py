"""Host-local locks that need no store: an flock on a file. Below every other package, so that a target
(which sits below the store) can serialize with other processes on its host."""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class LockTimeout(Exception):
    """Somebody else holds the lock and did not let go in time."""


@contextmanager
def file_lock(path: Path, timeout: float, poll: float = 0.1, what: str = "the lock") -> Iterator[None]:
    """An exclusive flock on `path` (created if needed). flock locks belong to the open file, so
    this excludes other threads of this process as well as other processes; the kernel drops it
    when its holder dies. Raises LockTimeout after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    with path.open("a") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"{what} is held by another SUP process or thread") from None
                time.sleep(poll)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
