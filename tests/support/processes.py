"""Stopping the servers the tests start."""

from __future__ import annotations

import signal
import subprocess


def stop_process(process: subprocess.Popen[bytes] | None, timeout: float = 15) -> None:
    """SIGTERM, and SIGKILL if it has not exited within `timeout` seconds (no-op if already gone)."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
