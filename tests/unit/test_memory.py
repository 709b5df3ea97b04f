"""sup/common/memory.py in a process of its own: what `trim` gives back, and that the arena cap
defers to MALLOC_ARENA_MAX."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Fill malloc's heap with 64 KiB blocks (under the mmap threshold, so they come from the heap), keep
# the last one so the heap's top cannot shrink on its own, free the rest: the pages stay resident
# until something trims them.
SCRIPT = """
import json, sys
from sup.common import memory

def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) // 1024

blocks = [bytearray(64 * 1024) for _ in range(3000)]
keep = blocks[-1]
del blocks
before = rss()
memory.trim()
print(json.dumps({"before": before, "after": rss(), "capped": memory.limit_arenas()}))
"""


def _run(env: dict[str, str]) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    result: dict[str, int] = json.loads(done.stdout)
    return result


def test_trim_gives_freed_heap_pages_back() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    result = _run(env)
    assert result["before"] - result["after"] > 100  # MiB: most of the 187 MiB freed
    assert result["capped"]


def test_malloc_arena_max_set_by_the_operator_wins() -> None:
    result = _run({**os.environ, "MALLOC_ARENA_MAX": "4"})
    assert not result["capped"]
