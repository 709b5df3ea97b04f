"""Run a program from an unpacked image root filesystem without a container runtime: in a private
mount namespace (`unshare --mount`), with /dev, /proc and the test's directories bind-mounted into
the root, then `chroot` as the uid, gid and groups a pod's securityContext would give, with only the
capabilities given (as Kubernetes' `capabilities: {drop: [ALL], add: [...]}` leaves them).

The mounts live only in that namespace: they go when its last process ends, so nothing is left on
the machine. The process started is the program itself (unshare, env, setpriv and chroot exec it),
so stopping it by pid stops the "container"; its children (sshd's sessions) end with their
connections.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Identity:
    """Who the program runs as: like runAsUser, runAsGroup and supplementalGroups/fsGroup."""

    uid: int
    gid: int
    groups: Sequence[int] = ()


ROOT_IDENTITY = Identity(0, 0, (0,))


def make_emptydir(path: Path, owner: int = 0, mode: int = 0o777) -> Path:
    """A directory to mount as the kubelet makes an emptyDir (root's, mode 0777) or a volume root."""
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, owner, owner)
    path.chmod(mode)
    return path


@dataclass
class Chroot:
    """An unpacked image and the directories to mount into it (path in the image -> host path)."""

    root: Path
    mounts: dict[str, Path] = field(default_factory=dict)

    def command(
        self,
        argv: Sequence[str],
        *,
        identity: Identity = ROOT_IDENTITY,
        env: Mapping[str, str] | None = None,
        workdir: str = "/",
        capabilities: Sequence[str] | None = None,
        mounts: Mapping[str, Path] | None = None,
        read_only: bool = False,
        read_only_mounts: Mapping[str, Path] | None = None,
    ) -> list[str]:
        """The host command that runs `argv` in the image. `capabilities`: the only ones the program
        keeps (None: all of root's, for a uid 0 program); `read_only`: the image's files are
        (readOnlyRootFilesystem), the mounts are not; `read_only_mounts`: mounted read-only."""
        root = str(self.root)
        lines = ["set -e", f"mount --bind {shlex.quote(root)} {shlex.quote(root)}"]
        lines.append(f"mount --rbind /dev {shlex.quote(root + '/dev')}")
        lines.append(f"mount -t proc proc {shlex.quote(root + '/proc')}")
        for target, source in {**self.mounts, **(mounts or {})}.items():
            inside = self.root / target.lstrip("/")
            inside.mkdir(parents=True, exist_ok=True)
            lines.append(f"mount --bind {shlex.quote(str(source))} {shlex.quote(str(inside))}")
        for target, source in (read_only_mounts or {}).items():  # as the kubelet mounts a Secret
            inside = self.root / target.lstrip("/")
            inside.mkdir(parents=True, exist_ok=True)
            lines.append(f"mount --bind {shlex.quote(str(source))} {shlex.quote(str(inside))}")
            lines.append(f"mount -o remount,bind,ro {shlex.quote(str(inside))}")
        if read_only:
            lines.append(f"mount -o remount,bind,ro {shlex.quote(root)}")
        prefix: list[str] = []
        if capabilities is not None:
            keep = "".join(f",+{name.lower()}" for name in capabilities)
            prefix = ["setpriv", "--inh-caps=-all", f"--bounding-set=-all{keep}"]
        groups = ",".join(str(g) for g in (identity.groups or (identity.gid,)))
        chroot = ["chroot", f"--userspec={identity.uid}:{identity.gid}", f"--groups={groups}", root]
        variables = [f"{name}={value}" for name, value in (env or {}).items()]
        inner = ["/usr/bin/env", "-i", "-C", workdir, *variables, *argv]
        lines.append("exec " + shlex.join([*prefix, *chroot, *inner]))
        return ["unshare", "--mount", "--propagation", "private", "bash", "-c", "\n".join(lines)]


def run(command: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a command made by Chroot.command to its end."""
    return subprocess.run(list(command), capture_output=True, text=True, timeout=timeout, check=False)


def start(command: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """Start a command made by Chroot.command in the background, its output to `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT)
