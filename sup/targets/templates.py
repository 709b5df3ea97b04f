"""Where the files in templates/ are: the repository's, or their copy inside an installed wheel
(pyproject.toml force-includes templates/ as sup/_templates). Shared by every target that renders one."""

from __future__ import annotations

from pathlib import Path


def templates_dir() -> Path:
    """templates/ of the repository, or its copy inside an installed wheel (sup/_templates)."""
    packaged = Path(__file__).resolve().parents[1] / "_templates"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "templates"
