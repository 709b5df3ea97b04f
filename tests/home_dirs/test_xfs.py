"""On a real XFS filesystem (an image file, loop-mounted with project quotas): each home gets an
XFS project (id = uid, inherited by what is made in it) and a hard limit that refuses the person's
writes past it with EDQUOT."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sup.config.home_dirs import HomeDirsSettings
from sup.home_dirs import disk, quota
from sup.home_dirs.service import sync
from sup.home_dirs.wanted import people_files, wanted

pytestmark = pytest.mark.usefixtures("as_root")

ALICE = "alice:x:2001:2101:Alice:/home/alice:/bin/bash\n"
BOB = "bob:x:2002:2102:Bob:/home/lab/bob:/bin/bash\n"
# what SUP's login ConfigMaps hold (the API server's listing, faked: tests/kube covers the real one)
CONFIG_MAPS = [
    {"metadata": {"name": "login-2001"}, "data": {"passwd": ALICE, "group": "", "alice.keys": ""}},
    {"metadata": {"name": "group-lab"}, "data": {"passwd": ALICE + BOB, "group": ""}},
]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def _xfs(tmp_path: Path, options: str, fallback: bool = False) -> Iterator[Path]:
    """An XFS image mounted with `options`; with `fallback`, mounted without them where this kernel
    cannot (no CONFIG_XFS_QUOTA: Debian's cloud kernels), which the caller sees in /proc/mounts."""
    for tool in ("mkfs.xfs", "xfs_quota", "xfs_io", "mount", "umount", "setpriv"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup --dev installs xfsprogs)")
    image = tmp_path / "xfs.img"
    # the mount point on a path the person may walk (pytest's tmp_path is root's alone)
    mount = Path(tempfile.mkdtemp(prefix="sup-xfs-", dir="/tmp"))
    mount.chmod(0o755)
    assert _run("truncate", "-s", "320M", str(image)).returncode == 0
    made = _run("mkfs.xfs", "-q", str(image))
    assert made.returncode == 0, made.stderr
    mounted = _run("mount", "-o", f"loop,{options}", str(image), str(mount))
    if mounted.returncode != 0 and fallback:
        mounted = _run("mount", "-o", "loop", str(image), str(mount))
    if mounted.returncode != 0:
        mount.rmdir()
        pytest.fail(f"cannot loop-mount an XFS image here: {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        done = _run("umount", str(mount))
        assert done.returncode == 0, done.stderr
        mount.rmdir()
        image.unlink()


@pytest.fixture
def xfs(tmp_path: Path) -> Iterator[Path]:
    yield from _xfs(tmp_path, "noquota")


@pytest.fixture
def xfs_prjquota(tmp_path: Path) -> Iterator[Path]:
    yield from _xfs(tmp_path, "prjquota", fallback=True)


def _quotas_on(mount: Path) -> bool:
    """Whether the kernel mounted it with project quotas (it cannot without CONFIG_XFS_QUOTA, as in
    Debian 12's cloud kernel, which this machine runs)."""
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if fields[1] == str(mount):
            return "prjquota" in fields[3] or "pquota" in fields[3]
    raise AssertionError(f"{mount} is not mounted")


def _projid(path: Path) -> str:
    done = _run("xfs_io", "-c", "lsproj", str(path))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_each_home_is_its_uids_project_and_what_is_made_in_it_inherits_it(xfs: Path) -> None:
    settings = HomeDirsSettings(namespace="users", mount=str(xfs), metrics_port=None)
    outcome = sync(settings, people_files(CONFIG_MAPS))
    assert sorted(outcome.made) == ["alice", "lab/bob"]
    # quota "none" sets no project; the project step alone (its limit needs quota support)
    assert _projid(xfs / "alice") == "projid = 0"
    homes = {h.path: h for h in wanted(people_files(CONFIG_MAPS), settings.home_root).homes.values()}
    with disk.mount_fd(str(xfs)) as root:
        assert quota.project(root, homes["alice"]) is True
        assert quota.project(root, homes["alice"]) is False  # already so
    done = _run(
        "setpriv", "--reuid=2001", "--regid=2101", "--clear-groups", "mkdir", str(xfs / "alice" / "sub")
    )
    assert done.returncode == 0, done.stderr
    assert _projid(xfs / "alice") == "projid = 2001"
    assert _projid(xfs / "alice" / "sub") == "projid = 2001"
    assert "P" in _run("xfs_io", "-c", "lsattr", str(xfs / "alice")).stdout.split()[0]  # inherit flag
    assert _projid(xfs / "lab" / "bob") == "projid = 0"


def test_a_person_cannot_write_past_their_homes_limit(xfs_prjquota: Path) -> None:
    """Where the kernel has XFS quotas: writes past the limit fail with EDQUOT. Where it has not (this
    CI machine's kernel), the homes are still made and the pass fails saying why, rather than leaving
    people without a limit silently."""
    settings = HomeDirsSettings(
        namespace="users", mount=str(xfs_prjquota), quota="xfs", size="16Mi", metrics_port=None
    )
    if not _quotas_on(xfs_prjquota):
        with pytest.raises(quota.QuotaError, match="xfs_quota failed"):
            sync(settings, people_files(CONFIG_MAPS))
        assert os.stat(xfs_prjquota / "alice").st_uid == 2001  # made before the quota step
        assert _projid(xfs_prjquota / "alice") == "projid = 2001"
        return
    outcome = sync(settings, people_files(CONFIG_MAPS))
    assert sorted(outcome.made) == ["alice", "lab/bob"] and outcome.refused == []
    assert outcome.homes == 2
    home = xfs_prjquota / "alice"
    assert _projid(home) == "projid = 2001"
    within = _run(
        "setpriv", "--reuid=2001", "--regid=2101", "--clear-groups",
        "dd", "if=/dev/zero", f"of={home}/small", "bs=1M", "count=8", "conv=fsync",
    )  # fmt: skip
    assert within.returncode == 0, within.stderr
    past = _run(
        "setpriv", "--reuid=2001", "--regid=2101", "--clear-groups",
        "dd", "if=/dev/zero", f"of={home}/big", "bs=1M", "count=32", "conv=fsync",
    )  # fmt: skip
    assert past.returncode != 0
    assert "Disk quota exceeded" in past.stderr
    report = _run("xfs_quota", "-x", "-c", "report -p -n", str(xfs_prjquota))
    assert report.returncode == 0, report.stderr
    rows = {fields[0]: fields for fields in (row.split() for row in report.stdout.splitlines()) if fields}
    assert rows["#2001"][3] == str(16 * 1024)  # hard limit, KiB
    assert rows["#2002"][3] == str(16 * 1024)
    # a second pass sets nothing again
    assert sync(settings, people_files(CONFIG_MAPS)).made == []
    assert os.stat(home).st_uid == 2001
