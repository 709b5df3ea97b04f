"""Running the installed `sup` command the way an operator does: a subprocess with SUP_* settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def sup_executable() -> str:
    candidate = Path(sys.executable).parent / "sup"
    if not candidate.exists():  # pragma: no cover - the package is installed with its console script
        raise RuntimeError(f"{candidate} is missing: install the package (pip install -e .)")
    return str(candidate)


def sup_env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUP_")}
    env.update(settings)
    return env


def run_sup(
    *args: str, env: dict[str, str], cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sup_executable(), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
