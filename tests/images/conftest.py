"""Fixtures for SUP's images: built once per session by scripts/build-images (nothing is built when
the cache holds this checkout's images) and unpacked into temp root filesystems, removed at the end.
The tests run them without a container runtime (tests/support/chroot.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.images import Images, ImagesUnavailable, build_images, unpack


@pytest.fixture(scope="session")
def images() -> Images:
    try:
        return build_images()
    except ImagesUnavailable as exc:
        pytest.skip(str(exc))


def _unpacked(archive: Path) -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="sup-image-"))
    try:
        yield unpack(archive, base / "root")
    finally:
        shutil.rmtree(base)


@pytest.fixture(scope="session")
def login_root(images: Images) -> Iterator[Path]:
    """The login image's files, to run in (tests add mount points and files to it)."""
    yield from _unpacked(images.login)


@pytest.fixture(scope="session")
def sup_root(images: Images) -> Iterator[Path]:
    """SUP's image's files, to run in."""
    yield from _unpacked(images.sup)


@pytest.fixture(scope="module")
def pristine_roots(images: Images) -> Iterator[dict[str, Path]]:
    """Both images' files as built, never run in: {"login": root, "sup": root}."""
    login, sup = _unpacked(images.login), _unpacked(images.sup)
    yield {"login": next(login), "sup": next(sup)}
    for unpacked in (login, sup):
        next(unpacked, None)
