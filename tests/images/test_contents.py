"""What is (not) in the images: no private key, munge key or host key baked in, no setuid or setgid
program in the login image, no docs or apt lists; the login image's NSS and sshd wiring."""

from __future__ import annotations

import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(1800)  # the first test may build the images

# A PEM or OpenSSH private key with its body (binaries and parsers name the marker, without a body).
PRIVATE_KEY = re.compile(rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----\s+(?:[A-Za-z0-9+/=:,\-]+\s+){2,}-----END")
# Public test vectors shipped inside libraries (not secrets, nobody's identity): jwcrypto's test
# module, GnuTLS's self-test key (in apt's TLS library, in every Debian image).
KNOWN_TEST_VECTORS = ("/jwcrypto/tests.py", "/jwcrypto/__pycache__/tests.cpython-311.pyc", "/libgnutls.so.30")
# setuid/setgid programs the login image keeps: none (the Containerfile clears every such bit; pods
# run with allowPrivilegeEscalation false, where they could not work anyway).
SETUID_ALLOWED: set[str] = set()


def _is_a_key(path: Path, root: Path) -> bool:
    """Named like a munge or host key, or holding a private key (known test vectors aside)."""
    name = path.name
    if name == "munge.key" or name.startswith("ssh_host_") or name.endswith("_host_ed25519_key"):
        return True
    inside = f"/{path.relative_to(root)}"
    return not any(vector in inside for vector in KNOWN_TEST_VECTORS) and bool(
        PRIVATE_KEY.search(path.read_bytes())
    )


def _files(root: Path) -> Iterator[Path]:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            yield path


@pytest.mark.parametrize("image", ["login", "sup"])
def test_no_private_key_or_munge_key_in_the_image(image: str, pristine_roots: dict[str, Path]) -> None:
    root = pristine_roots[image]
    keys = [str(path.relative_to(root)) for path in _files(root) if _is_a_key(path, root)]
    assert keys == []
    assert not (root / "var/run/secrets").exists() and not (root / "run/secrets").exists()


def test_login_image_has_no_setuid_programs_docs_or_apt_lists(pristine_roots: dict[str, Path]) -> None:
    login_root = pristine_roots["login"]
    special = {
        str(path.relative_to(login_root))
        for path in _files(login_root)
        if path.stat().st_mode & (stat.S_ISUID | stat.S_ISGID)
    }
    assert special == SETUID_ALLOWED
    assert list((login_root / "var/lib/apt/lists").glob("*_Packages*")) == []
    assert list((login_root / "usr/share/man").rglob("*.gz")) == []
    docs = [p for p in (login_root / "usr/share/doc").rglob("*") if p.is_file() and p.name != "copyright"]
    assert docs == []


def test_login_image_resolves_users_through_the_mounted_maps(pristine_roots: dict[str, Path]) -> None:
    login_root = pristine_roots["login"]
    assert (login_root / "etc/passwd.cache").readlink() == Path("/etc/sup/login/passwd")
    assert (login_root / "etc/group.cache").readlink() == Path("/etc/sup/login/group")
    lines = (login_root / "etc/nsswitch.conf").read_text().splitlines()
    nsswitch = {
        name: sources.split() for name, sources in (line.split(":", 1) for line in lines if ":" in line)
    }
    assert nsswitch["passwd"] == nsswitch["group"] == ["files", "cache"]
    assert list(login_root.glob("usr/lib/*/libnss_cache.so.2"))
    sshd_config = (login_root / "etc/ssh/sup_login_sshd_config").read_text().splitlines()
    wanted = [
        "AuthorizedKeysFile /etc/sup/login/%u.keys",
        "UsePAM no",
        "PidFile none",
        "PasswordAuthentication no",
    ]
    assert [line for line in wanted if line not in sshd_config] == []
