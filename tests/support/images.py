"""SUP's container images for the tests: built (or found in the cache) by scripts/build-images, and
unpacked from their OCI archives into a root filesystem that a test runs in a chroot.

An OCI archive is a tar of an image layout: index.json names the manifest, the manifest lists the
layers (tar, usually gzipped) from the bottom up. Unpacking applies them in order, with the OCI
whiteouts (`.wh.NAME` deletes NAME, `.wh..wh..opq` empties its directory), keeping owners and modes
(the tests run as root), so the tree is what a container runtime would mount.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build-images"
SUP_IMAGE = "localhost/sup:0.1.0"
LOGIN_IMAGE = "localhost/sup-login:0.1.0"
_WHITEOUT = ".wh."
_OPAQUE = ".wh..wh..opq"


class ImagesUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class Images:
    """The archives scripts/build-images printed, by image name."""

    archives: dict[str, Path]

    @property
    def sup(self) -> Path:
        """The archive of SUP's image, SUP_IMAGE."""
        return self.archives["sup"]

    @property
    def login(self) -> Path:
        """The archive of the login image, LOGIN_IMAGE."""
        return self.archives["login"]


def parse_build_output(output: str) -> dict[str, Path]:
    """`NAME PATH` lines (NAME `sup` or `login`), as scripts/build-images prints them."""
    archives: dict[str, Path] = {}
    for line in output.splitlines():
        if line.strip():
            image, path = line.split(" ", 1)
            archives[image] = Path(path)
    return archives


def build_images(timeout: float = 1800) -> Images:
    """Run scripts/build-images: nothing is built when the cache holds the checkout's images."""
    if os.geteuid() != 0:
        raise ImagesUnavailable("building and running the images needs root (mmdebstrap, buildah, chroot)")
    for tool in ("buildah", "mmdebstrap"):
        if shutil.which(tool) is None:
            raise ImagesUnavailable(f"{tool} is not installed (scripts/setup --servers installs it)")
    result = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"scripts/build-images failed ({result.returncode}):\n{result.stderr[-4000:]}")
    archives = parse_build_output(result.stdout)
    assert set(archives) == {"sup", "login"}, result.stdout
    return Images(archives)


def cached_images() -> dict[str, Path] | None:
    """What `scripts/build-images --cached-only` reports: the archives when both are built, else None."""
    result = subprocess.run(
        [str(BUILD_SCRIPT), "--cached-only"], capture_output=True, text=True, timeout=60, check=False
    )
    return parse_build_output(result.stdout) if result.returncode == 0 else None


def reference_name(archive: Path) -> str:
    """The name an importer (`ctr images import`, `podman load`) gives the archive's image."""
    with tarfile.open(archive) as layout:
        (descriptor,) = _json(layout, "index.json")["manifests"]
        return str(descriptor["annotations"]["org.opencontainers.image.ref.name"])


def _blob(layout: tarfile.TarFile, digest: str) -> tarfile.TarFile:
    algorithm, value = digest.split(":", 1)
    member = layout.extractfile(f"blobs/{algorithm}/{value}")
    assert member is not None, digest
    return tarfile.open(fileobj=member, mode="r:*")


def _json(layout: tarfile.TarFile, name: str) -> Any:
    member = layout.extractfile(name)
    assert member is not None, name
    return json.load(member)


def image_config(archive: Path) -> dict[str, Any]:
    """The image's configuration (Entrypoint, Cmd, User, Env, ...), its `config` object."""
    with tarfile.open(archive) as layout:
        manifest = _manifest(layout)
        algorithm, value = manifest["config"]["digest"].split(":", 1)
        config: dict[str, Any] = _json(layout, f"blobs/{algorithm}/{value}")
        return dict(config.get("config", {}))


def _manifest(layout: tarfile.TarFile) -> dict[str, Any]:
    index = _json(layout, "index.json")
    (descriptor,) = index["manifests"]
    algorithm, value = descriptor["digest"].split(":", 1)
    manifest: dict[str, Any] = _json(layout, f"blobs/{algorithm}/{value}")
    return manifest


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def unpack(archive: Path, root: Path) -> Path:
    """Unpack the image in `archive` into the empty directory `root`; return `root`."""
    root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as layout:
        for descriptor in _manifest(layout)["layers"]:
            with _blob(layout, descriptor["digest"]) as layer:
                members = []
                for member in layer.getmembers():
                    path = Path(member.name)
                    if path.name == _OPAQUE:
                        for child in (root / path.parent).glob("*"):
                            _remove(child)
                    elif path.name.startswith(_WHITEOUT):
                        _remove(root / path.parent / path.name[len(_WHITEOUT) :])
                    else:
                        target = root / path
                        if target.is_symlink() or (target.exists() and not target.is_dir()):
                            target.unlink()  # a layer replaces what the one below had there
                        members.append(member)
                layer.extractall(root, members=members, numeric_owner=True, filter="fully_trusted")
    return root
