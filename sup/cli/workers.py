"""`sup serve --workers N`: one listening socket, N `sup serve` processes accepting on it.

The parent binds the address, then starts N children (`sup serve --fd FD ...`, by this interpreter)
that inherit the socket; the kernel hands each new connection to one of them. Worker 0 runs the
reconciler (and the Keycloak puller beside it) when `--reconciler` is on; the others are API-only
(`--no-reconciler`), so the reconciler runs once per `sup serve` (and the leader lease still picks
one among replicas).

The parent only supervises: SIGTERM or SIGINT (Ctrl-C) is passed to every child, which finishes its
requests and exits; a child still running after STOP_TIMEOUT seconds is killed. When a child exits on
its own, the parent stops the others and exits non-zero: the service manager (or Kubernetes) restarts
the whole, rather than running on with fewer workers or none that reconciles. Children also get
SIGTERM if the parent dies without that chance (Linux: PR_SET_PDEATHSIG), so none is left orphaned.

What stays per process: Prometheus metrics (a scrape of /metrics answers from one worker), the SCIM
and write rate limits (each worker grants the configured rate: N workers allow up to N times that),
and /readyz (it reports the reconciler of the worker that answered: `off` on API-only workers).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from types import FrameType

STOP_TIMEOUT = 30.0
PR_SET_PDEATHSIG = 1


def listen(host: str, port: int) -> socket.socket:
    """The listening socket the workers share (bound here, so a taken port fails before any starts)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=2048)
    sock.set_inheritable(True)
    return sock


def worker_command(fd: int, log_level: str, reconciler: bool) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from sup.cli import main; main()",
        "serve",
        "--fd",
        str(fd),
        "--log-level",
        log_level,
        "--reconciler" if reconciler else "--no-reconciler",
    ]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def supervise(
    sock: socket.socket,
    workers: int,
    log_level: str,
    reconciler: bool,
    command: Callable[[int, int], list[str]] | None = None,
) -> int:
    """Run `workers` children on `sock` until a signal or a child's exit; the exit code to return.

    `command(fd, index)` is each child's argv (default: `sup serve --fd FD`; `sup gateway` passes its
    own)."""
    stopping: list[int] = []

    def on_signal(signum: int, _: FrameType | None) -> None:
        stopping.append(signum)

    previous: dict[signal.Signals, Callable[[int, FrameType | None], object] | int | None] = {}
    for handled in (signal.SIGTERM, signal.SIGINT):
        previous[handled] = signal.signal(handled, on_signal)
    children: list[subprocess.Popen[bytes]] = []
    try:
        for index in range(workers):
            argv = (
                command(sock.fileno(), index)
                if command is not None
                else worker_command(sock.fileno(), log_level, reconciler and index == 0)
            )
            children.append(
                subprocess.Popen(  # noqa: S603 - this interpreter running SUP itself
                    argv, pass_fds=(sock.fileno(),), preexec_fn=_die_with_parent
                )
            )
        sock.close()  # the children hold it now
        while not stopping and all(child.poll() is None for child in children):
            time.sleep(0.2)
        return 0 if stopping else 1
    finally:
        _stop(children)
        for handled, handler in previous.items():
            signal.signal(handled, handler)


def _stop(children: list[subprocess.Popen[bytes]]) -> None:
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for child in children:
        try:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
