"""One sacctmgr writer per slurmdbd at a time: parallel writers deadlock MariaDB, crash slurmdbd, and
lose adds that exited 0 (measured: 4 writers lost 2 of 40).

Two locks, taken in this order and held for a whole apply (writes and the re-reads that verify them):
1. a host-local flock on `lock_dir/slurmdbd-<host>-<port>.lock`: excludes every thread (each opens
   the file itself, and flock locks belong to the open file) and process on this host, whatever
   store it uses;
2. the framework's named writer lock `slurmdbd:<host>:<port>` (TargetContext.lock, backed by the
   store's named lock): a PostgreSQL advisory lock excludes SUP replicas on other hosts; on SQLite it
   is a second flock.
A process that dies releases both (the kernel drops its flocks, PostgreSQL its session).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from sup.common.locks import LockTimeout, file_lock
from sup.targets.base import TargetError
from sup.targets.spec import LockFactory

DEFAULT_DBD_PORT = 6819


def slurmdbd_address(explicit: str | None, environ: dict[str, str] | None = None) -> str:
    """host:port of the slurmdbd sacctmgr talks to: the setting, else slurm.conf's
    AccountingStorageHost/Port (SLURM_CONF or /etc/slurm/slurm.conf), else "default"."""
    if explicit:
        return explicit
    env = os.environ if environ is None else environ
    path = Path(env.get("SLURM_CONF") or "/etc/slurm/slurm.conf")
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "default"
    found: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.match(r"(?i)^(AccountingStorageHost|AccountingStoragePort)\s*=\s*(\S+)", line)
        if match:
            found[match.group(1).lower()] = match.group(2)
    host = found.get("accountingstoragehost")
    if host is None:
        return "default"
    return f"{host}:{found.get('accountingstorageport', DEFAULT_DBD_PORT)}"


def _file_name(address: str) -> str:
    return "slurmdbd-" + re.sub(r"[^A-Za-z0-9_.-]", "-", address) + ".lock"


@contextmanager
def host_lock(directory: str, address: str, timeout: float, poll: float = 0.1) -> Iterator[None]:
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / _file_name(address)).touch()
    except OSError as exc:
        raise TargetError(
            f"cannot open the slurmdbd writer lock in {directory} (slurm.lock_dir): {exc}"
        ) from exc
    with ExitStack() as held:
        try:
            held.enter_context(file_lock(path / _file_name(address), timeout, poll))
        except LockTimeout:
            raise TargetError(
                f"another process on this host is writing to slurmdbd {address} "
                f"(waited {timeout:.0f} s, slurm.lock_timeout)"
            ) from None
        yield


@contextmanager
def writer_lock(lock: LockFactory, directory: str, address: str, timeout: float) -> Iterator[None]:
    """Both locks for `address`; TargetError if either is not free within `timeout` seconds."""
    started = time.monotonic()
    with host_lock(directory, address, timeout):
        remaining = max(0.0, timeout - (time.monotonic() - started))
        try:
            with lock(f"slurmdbd:{address}", remaining):
                yield
        except LockTimeout as exc:
            raise TargetError(f"another SUP replica is writing to slurmdbd {address}: {exc}") from exc
