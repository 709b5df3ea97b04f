"""XFS project quotas: one project per home, its id the person's uid (home_dirs.quota: xfs).

The home directory gets the project id and the inherit flag through FS_IOC_FSSETXATTR on a
descriptor opened without following symlinks (disk.py): every file and directory made in it later
belongs to the project. The limit (hard blocks = home_dirs.size) is set with `xfs_quota -x -c 'limit
-p bhard=N ID' MOUNT`, many homes per run. Files a directory already held before it got its project
keep their old project (xfs_quota's `project -s` would walk and change them; the maker does not walk
a person's tree): a directory that had files before quotas were turned on is only partly counted.

Needs CAP_FOWNER (the project id of a directory it does not own) and CAP_SYS_ADMIN (quotactl).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import subprocess
from collections.abc import Iterable

from sup.home_dirs.disk import _parent, opened
from sup.home_dirs.wanted import Home

# struct fsxattr (linux/fs.h): xflags, extsize, nextents, projid, cowextsize, 8 bytes of padding
_FSXATTR = struct.Struct("=IIIII8s")
FS_IOC_FSGETXATTR = 0x801C581F
FS_IOC_FSSETXATTR = 0x401C5820
FS_XFLAG_PROJINHERIT = 0x00000200
BATCH = 200  # limits per xfs_quota run


class QuotaError(Exception):
    pass


def project(root: int, home: Home) -> bool:
    """Give the home directory project id = uid and the inherit flag; True if it changed."""
    parent = _parent(root, home.rel, make=False)
    try:
        with opened(parent, home.rel[-1]) as fd:
            raw = bytearray(_FSXATTR.size)
            fcntl.ioctl(fd, FS_IOC_FSGETXATTR, raw)
            xflags, extsize, nextents, projid, cow, pad = _FSXATTR.unpack(raw)
            if projid == home.uid and xflags & FS_XFLAG_PROJINHERIT:
                return False
            packed = _FSXATTR.pack(xflags | FS_XFLAG_PROJINHERIT, extsize, nextents, home.uid, cow, pad)
            fcntl.ioctl(fd, FS_IOC_FSSETXATTR, packed)
            return True
    finally:
        os.close(parent)


def limit(mount: str, uids: Iterable[int], size_bytes: int) -> None:
    """Set each project's hard block limit (xfs_quota takes kibibytes with a k suffix)."""
    binary = shutil.which("xfs_quota")
    if binary is None:
        raise QuotaError("xfs_quota is not installed (package xfsprogs)")
    ordered = sorted(set(uids))
    kib = max(size_bytes // 1024, 1)
    for start in range(0, len(ordered), BATCH):
        command = [binary, "-x"]
        for uid in ordered[start : start + BATCH]:
            command += ["-c", f"limit -p bhard={kib}k {uid}"]
        # the binary found on PATH, numbers and the maker's own mount setting: no person's input
        done = subprocess.run(  # noqa: S603
            [*command, mount], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0 or done.stderr.strip():
            raise QuotaError(f"xfs_quota failed ({done.returncode}): {done.stderr.strip()[:500]}")
