"""The login image's idle reporter, for real: socat running images/login/sup-login-idle per connection
on a loopback port, in a PID namespace of its own (`unshare --pid --fork --mount-proc`, as root), so
that it counts what it would count in a login container: socat is PID 1 there, as sshd's listener
is in the pod, and nothing else runs until a test starts "the person's" process in it (`nsenter`).
With `sshd_config`, PID 1 is a real sshd with that config and socat its child, started as the
image's entrypoint starts them (socat in the background, then exec sshd).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.support.ports import free_port

SCRIPT = Path(__file__).resolve().parents[2] / "images" / "login" / "sup-login-idle"


class ReporterUnavailable(Exception):
    """socat, unshare or nsenter is missing, or this is not root."""


class IdleReporter:
    def __init__(self, sshd_config: Path | None = None) -> None:
        self._sshd = sshd_config
        for tool in ("socat", "unshare", "nsenter", "bash"):
            if shutil.which(tool) is None:
                raise ReporterUnavailable(f"{tool} is not installed")
        self.port = free_port()
        self._namespace: subprocess.Popen[bytes] | None = None
        self._pid1 = 0
        self._person: list[subprocess.Popen[bytes]] = []
        self._orphans: set[int] = set()

    def start(self, timeout: float = 30) -> IdleReporter:
        listen = f"TCP-LISTEN:{self.port},bind=127.0.0.1,reuseaddr,fork"
        reporter = ["socat", listen, f"EXEC:{SCRIPT}"]
        if self._sshd is not None:  # as images/login/sup-login does it
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
            entrypoint = 'socat "$1" "$2" & exec "$3" -D -e -f "$4"'
            reporter = [
                "bash",
                "-c",
                entrypoint,
                "sup-login",
                *reporter[1:],
                "/usr/sbin/sshd",
                str(self._sshd),
            ]
        self._namespace = subprocess.Popen(  # --kill-child: the namespace dies with unshare
            ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", *reporter],
            stdin=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL if self._sshd is not None else None,
        )
        deadline = time.monotonic() + timeout
        children = Path(f"/proc/{self._namespace.pid}/task/{self._namespace.pid}/children")
        while not self._pid1 or not self._listening():
            if self._namespace.poll() is not None:
                raise ReporterUnavailable(f"unshare exited with {self._namespace.returncode} (not root?)")
            if time.monotonic() > deadline:
                raise AssertionError("the idle reporter does not listen")
            found = children.read_text().split() if children.exists() else []
            self._pid1 = int(found[0]) if found else 0
            time.sleep(0.05)
        return self

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def ask(self) -> int:
        """One request to the reporter, as the gateway makes it: the number it answers."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as connection:
            connection.sendall(b"GET /busy HTTP/1.0\r\nHost: pod\r\n\r\n")
            answer = b""
            while chunk := connection.recv(4096):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 200 "), answer
        return int(body)

    def run_as_person(self, timeout: float = 30, title: str | None = None, orphan: bool = False) -> None:
        """A process of the person's in the container (a `sleep`, as a tmux or nohup job would be):
        nsenter forks it into the namespace. `title`: its argv[0] (as sshd names its children).
        `orphan`: its parent exits at once, so that it is PID 1's child (a `nohup` job after the
        session that started it closed)."""
        command = ["sleep", "3600"] if title is None else ["bash", "-c", 'exec -a "$0" sleep 3600', title]
        if orphan:
            command = ["bash", "-c", '("$@" >/dev/null 2>&1 &)', "nohup", *command]
            before = self._sleeping_children()
            subprocess.run(["nsenter", "--target", str(self._pid1), "--pid", *command], check=True)
            deadline = time.monotonic() + timeout
            while not self._sleeping_children() - before:
                assert time.monotonic() < deadline, "the orphan never became PID 1's child"
                time.sleep(0.05)
            self._orphans |= self._sleeping_children() - before
            return
        nsenter = subprocess.Popen(["nsenter", "--target", str(self._pid1), "--pid", *command])
        self._person.append(nsenter)
        children = Path(f"/proc/{nsenter.pid}/task/{nsenter.pid}/children")
        deadline = time.monotonic() + timeout
        while not (children.exists() and children.read_text().split()):
            assert nsenter.poll() is None, "nsenter failed"
            assert time.monotonic() < deadline, "nsenter started nothing"
            time.sleep(0.05)

    def _sleeping_children(self) -> set[int]:
        """The host pids of PID 1's children that run `sleep` (the person's orphans)."""
        found = set()
        for pid in Path(f"/proc/{self._pid1}/task/{self._pid1}/children").read_text().split():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                    found.add(int(pid))
        return found

    def stop_persons_processes(self) -> None:
        """Kill the person's processes (the sleep inside; nsenter, outside, then exits)."""
        for orphan in self._orphans:
            with contextlib.suppress(ProcessLookupError):
                os.kill(orphan, signal.SIGKILL)
        self._orphans.clear()
        for nsenter in self._person:
            children = Path(f"/proc/{nsenter.pid}/task/{nsenter.pid}/children")
            for pid in children.read_text().split() if nsenter.poll() is None else []:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            nsenter.wait()
        self._person.clear()

    def stop(self) -> None:
        """The reporter dies (its whole namespace: unshare's child gets SIGKILL with it)."""
        self.stop_persons_processes()
        if self._namespace is not None and self._namespace.poll() is None:
            self._namespace.send_signal(signal.SIGKILL)
            self._namespace.wait()
