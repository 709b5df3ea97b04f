"""The `sup` command sets the garbage collector's thresholds before any command runs
(sup/common/collector.py), in a process of its own: the thresholds are process-wide."""

from __future__ import annotations

import json
import subprocess
import sys

from sup.common.collector import THRESHOLDS

# Run the `sup` entry point with its Typer app replaced by a probe that reports what it finds.
SCRIPT = """
import gc, json
from sup import cli

cli.app = lambda: print(json.dumps(gc.get_threshold()))
print(json.dumps(gc.get_threshold()))
cli.main()
"""


def test_the_sup_command_runs_with_fewer_full_collections() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=60
    )
    before, during = (tuple(json.loads(line)) for line in done.stdout.splitlines())
    assert before == (700, 10, 10)  # CPython's defaults
    assert during == THRESHOLDS and THRESHOLDS[0] > before[0]
