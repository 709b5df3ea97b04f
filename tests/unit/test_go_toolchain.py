"""scripts/lib/go-toolchain.sh fetches a Go toolchain from the module proxy the environment names.

Run against a `file://` proxy in a temporary directory (GOPROXY allows that scheme), with a fake
toolchain whose checksum is pinned for the test: no network, and the real cache is left alone.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "scripts" / "lib" / "go-toolchain.sh"
VERSION = "9.9.9"
ARCH = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), "amd64")
FAKE_GO = '#!/bin/sh\n[ "$1 $2" = "env GOVERSION" ] && echo go9.9.9\n'


@pytest.fixture
def proxy(tmp_path: Path) -> tuple[Path, str]:
    """A module proxy directory holding a fake go 9.9.9 toolchain; returns (directory, its SHA-256)."""
    module = f"golang.org/toolchain@v0.0.1-go{VERSION}.linux-{ARCH}"
    where = tmp_path / "proxy" / "golang.org" / "toolchain" / "@v"
    where.mkdir(parents=True)
    archive = where / f"v0.0.1-go{VERSION}.linux-{ARCH}.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        info = zipfile.ZipInfo(f"{module}/bin/go")
        info.external_attr = 0o755 << 16
        zipped.writestr(info, FAKE_GO)
    return tmp_path / "proxy", hashlib.sha256(archive.read_bytes()).hexdigest()


def _old_go(tmp_path: Path, goproxy: str) -> Path:
    """A directory with a `go` that is too old, configured with `goproxy`."""
    bin_dir = tmp_path / "old-go"
    bin_dir.mkdir()
    go = bin_dir / "go"
    go.write_text(
        "#!/bin/sh\n"
        'case "$1 $2" in\n'
        '  "env GOVERSION") echo go1.19 ;;\n'
        f'  "env GOPROXY") echo "{goproxy}" ;;\n'
        "  *) exit 2 ;;\n"
        "esac\n"
    )
    go.chmod(0o755)
    return bin_dir


def _sup_go(
    tmp_path: Path, sha256: str, goproxy: str | None, path: str = "/usr/bin:/bin"
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": path,
        "HOME": str(tmp_path),
        "SUP_CACHE_DIR": str(tmp_path / "cache"),
        "SUP_GO_VERSION": VERSION,
    }
    if goproxy is not None:
        env["GOPROXY"] = goproxy
    # In the mode the build scripts source it in.
    script = f'set -euo pipefail; . "{LIBRARY}"; SUP_GO_SHA256[{VERSION}-{ARCH}]={sha256}; sup_go 1.26.0'
    return subprocess.run(["/bin/bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)


def _fetched(tmp_path: Path) -> str:
    return f"{tmp_path}/cache/go-toolchain/golang.org/toolchain@v0.0.1-go{VERSION}.linux-{ARCH}/bin/go"


def test_the_proxy_comes_from_goproxy(tmp_path: Path, proxy: tuple[Path, str]) -> None:
    directory, sha256 = proxy
    done = _sup_go(tmp_path, sha256, f"file://{directory}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == _fetched(tmp_path)
    assert os.access(done.stdout.strip(), os.X_OK)


def test_each_proxy_of_the_list_is_tried_in_turn(tmp_path: Path, proxy: tuple[Path, str]) -> None:
    directory, sha256 = proxy
    done = _sup_go(tmp_path, sha256, f"direct,file://{tmp_path}/nothing-here|file://{directory},off")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == _fetched(tmp_path)


def test_without_goproxy_the_proxy_of_the_go_on_path_is_used(tmp_path: Path, proxy: tuple[Path, str]) -> None:
    directory, sha256 = proxy
    old = _old_go(tmp_path, f"file://{directory},direct")
    done = _sup_go(tmp_path, sha256, None, path=f"{old}:/usr/bin:/bin")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == _fetched(tmp_path)


def test_with_no_proxy_to_ask_it_says_so_and_fetches_nothing(tmp_path: Path, proxy: tuple[Path, str]) -> None:
    _, sha256 = proxy
    nothing = _sup_go(tmp_path, sha256, None)
    assert nothing.returncode != 0 and "set GOPROXY" in nothing.stderr, nothing.stderr
    only_direct = _sup_go(tmp_path, sha256, "direct,off")
    assert only_direct.returncode != 0 and "names no module proxy" in only_direct.stderr, only_direct.stderr
    assert not (tmp_path / "cache" / "go-toolchain" / "golang.org").exists()


def test_a_toolchain_with_another_checksum_is_not_used(tmp_path: Path, proxy: tuple[Path, str]) -> None:
    directory, _ = proxy
    done = _sup_go(tmp_path, "0" * 64, f"file://{directory}")
    assert done.returncode != 0 and "not used" in done.stderr, done.stderr
    assert not Path(_fetched(tmp_path)).exists()
