"""A tiny image for pods in the tests: Debian's static busybox in an otherwise empty image.

Built once with buildah (no registry) into ${SUP_CACHE_DIR:-~/.cache/sup}/test-images/ as an OCI
archive, then imported into the test node (`KubeCluster.import_image`). busybox gives the tests
`sh`, `sleep`, `httpd`, `wget`, `nc`, `id`, `cat` ... as symlinks in /bin.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

BUSYBOX_IMAGE = "localhost/sup-test-busybox:1"
BUSYBOX = Path("/bin/busybox")


class TestImageUnavailable(RuntimeError):
    __test__ = False  # not a pytest test class


def cache_dir() -> Path:
    return Path(os.environ.get("SUP_CACHE_DIR") or Path.home() / ".cache" / "sup") / "test-images"


def _buildah(*args: str) -> str:
    storage = cache_dir().parent / "buildah"
    argv = [
        "buildah",
        "--storage-driver",
        "vfs",
        "--root",
        str(storage / "root"),
        "--runroot",
        str(storage / "runroot"),
        *args,
    ]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    if result.returncode != 0:
        raise TestImageUnavailable(f"buildah {' '.join(args)}: {result.stderr}")
    return result.stdout.strip()


def _applets() -> list[str]:
    listing = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True, check=True).stdout
    return [name for name in listing.split() if name != "busybox"]


def _rootfs_tar(path: Path) -> None:
    """/bin/busybox, a symlink per applet, and the directories a container expects."""
    with tarfile.open(path, "w") as tar:
        for directory in ("bin", "etc", "tmp", "www", "data"):
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        tar.add(BUSYBOX, arcname="bin/busybox")
        for applet in _applets():
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type = tarfile.SYMTYPE
            info.linkname = "busybox"
            tar.addfile(info)
        for name, text in {
            "etc/passwd": "root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n",
            "etc/group": "root:x:0:\nnogroup:x:65534:\n",
            "www/index.html": "hello from the test pod\n",
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))


def busybox_archive() -> Path:
    """The OCI archive of BUSYBOX_IMAGE, built the first time."""
    archive = cache_dir() / "sup-test-busybox-1.oci.tar"
    if archive.is_file():
        return archive
    if not BUSYBOX.is_file() or shutil.which("buildah") is None:
        raise TestImageUnavailable(
            "the test image needs buildah and busybox-static (scripts/setup --servers)"
        )
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        rootfs = Path(work) / "rootfs.tar"
        _rootfs_tar(rootfs)
        container = _buildah("from", "scratch")
        try:
            _buildah("add", container, str(rootfs), "/")
            _buildah("config", "--cmd", '["/bin/sh"]', "--env", "PATH=/bin", container)
            _buildah("commit", "--quiet", container, BUSYBOX_IMAGE)
        finally:
            _buildah("rm", container)
        partial = archive.with_suffix(".tmp")
        partial.unlink(missing_ok=True)
        _buildah("push", "--quiet", BUSYBOX_IMAGE, f"oci-archive:{partial}:{BUSYBOX_IMAGE}")
        _buildah("rmi", BUSYBOX_IMAGE)
        partial.rename(archive)
    return archive
