"""A real headless browser for the admin page tests: Debian's chromium (scripts/setup --dev installs
it). tests/support/cdp.py drives it."""

from __future__ import annotations

import shutil


class BrowserUnavailable(RuntimeError):
    pass


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise BrowserUnavailable("no chromium on PATH: apt-get install chromium (scripts/setup --dev does)")
