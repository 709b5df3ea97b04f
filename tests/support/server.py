"""`sup serve` as a real process on a free loopback port."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from tests.support.cli import sup_executable
from tests.support.ports import free_port
from tests.support.processes import stop_process


class SupServer:
    def __init__(
        self,
        env: dict[str, str],
        log: Path,
        log_level: str = "warning",
        host: str = "127.0.0.1",
        args: Sequence[str] = (),
    ) -> None:
        """`host`: the address it listens on (0.0.0.0 where a test shows a pod cannot reach it);
        the tests reach it on loopback either way. `args`: more `sup serve` options."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        self._log = log.open("w")
        self.process = subprocess.Popen(
            [
                sup_executable(),
                "serve",
                "--host",
                host,
                "--port",
                str(self.port),
                "--log-level",
                log_level,
                *args,
            ],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"sup serve exited with {self.process.returncode}: {self.log_path.read_text()}"
                )
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"sup serve did not become ready: {self.log_path.read_text()}")

    def stop(self) -> None:
        stop_process(self.process, timeout=10)
        self._log.close()
