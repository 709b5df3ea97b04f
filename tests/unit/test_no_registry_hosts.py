"""No file of the repository names a package registry's host.

Where a tool needs a registry, it takes it from its environment (pip's index, GOPROXY via `go env`,
...): a site behind a mirror must not find a public host written into a script, a config or a doc.
The host names are assembled from parts here so that this file does not name them either.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_HOSTS = [
    ("proxy", "golang"),
    ("pypi", "org"),
    ("files", "pythonhosted"),
    ("registry", "npmjs"),
    ("registry", "yarnpkg"),
    ("crates", "io"),
    ("repo", "maven"),
    ("repo1", "maven"),
    ("rubygems", "org"),
    ("deb", "debian"),
]
# Any one character between the two parts, as grep would read a host name given as a pattern.
REGISTRY_HOST = re.compile("|".join(rf"{a}.{b}" for a, b in _HOSTS))


def _repository_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def test_no_file_names_a_package_registry_host() -> None:
    files = _repository_files()
    assert any(f.name == "go-toolchain.sh" for f in files)  # the listing works
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}"
        for path in files
        for number, line in enumerate(path.read_bytes().decode("utf-8", "replace").splitlines(), 1)
        if REGISTRY_HOST.search(line)
    ]
    assert not found, "\n".join(found)
