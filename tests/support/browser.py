"""A real headless browser for the admin page test: Debian's chromium (scripts/setup --dev installs
it), driven the simplest way there is: `--dump-dom` prints the DOM once the page's scripts have run."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile


class BrowserUnavailable(RuntimeError):
    pass


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise BrowserUnavailable("no chromium on PATH: apt-get install chromium (scripts/setup --dev does)")


def dump_dom(binary: str, url: str, budget_ms: int = 15000) -> str:
    """The DOM of `url` after its scripts ran (virtual time lets pending fetches finish first)."""
    profile = tempfile.mkdtemp(prefix="sup-chromium-")
    args = [
        binary, "--headless", "--disable-gpu", "--no-first-run", "--disable-extensions",
        "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
        "--dump-dom", url,
    ]  # fmt: skip
    if os.geteuid() == 0:
        args.insert(1, "--no-sandbox")  # chromium refuses to run as root with its sandbox
    try:
        result = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if result.returncode != 0 or "<html" not in result.stdout:
        raise AssertionError(f"chromium failed ({result.returncode}): {result.stderr[-2000:]}")
    return result.stdout
