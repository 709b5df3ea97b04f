"""The login image run as Kubernetes would run a login pod, without Kubernetes: the ConfigMap SUP
mounts at /etc/sup/login is a temp directory the test writes (passwd, group, USER.keys), the home
volume is a temp directory owned by the user, the munge socket's emptyDir another; the entrypoint
runs in a chroot as the pod's securityContext says (tests/support/chroot.py). SSH goes to sshd on a
free loopback port with keys made by ssh-keygen.
"""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.chroot import Chroot, Identity, make_emptydir, start
from tests.support.ports import free_port
from tests.support.processes import stop_process

GROUP_POD_CAPABILITIES = ("SETUID", "SETGID", "SYS_CHROOT", "AUDIT_WRITE", "CHOWN")  # the group template's


@dataclass(frozen=True)
class Person:
    name: str
    uid: int
    gid: int

    @property
    def home(self) -> str:
        return f"/home/{self.name}"

    @property
    def passwd_line(self) -> str:
        return f"{self.name}:x:{self.uid}:{self.gid}:{self.name.title()}:{self.home}:/bin/bash"


def make_key(directory: Path, name: str) -> Path:
    """A new ed25519 key pair; the private key's path (the public one is PATH.pub)."""
    path = directory / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True)
    return path


class LoginPod:
    """One login "pod" in the image at `root`: its ConfigMap directory, homes and sshd process."""

    def __init__(self, root: Path, work: Path) -> None:
        self.work = work
        self.config = make_emptydir(work / "login", mode=0o755)
        self.known_hosts = work / "known_hosts"
        self.log = work / "sshd.log"
        self.chroot = Chroot(root, {"/etc/sup/login": self.config})
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    # --- the ConfigMap --------------------------------------------------------------------------

    def write(self, name: str, text: str) -> None:
        """Replace one file of the ConfigMap (a new file renamed into place, as the kubelet swaps)."""
        path = self.config / name
        new = path.with_name(f".{name}.new")
        new.write_text(text)
        new.chmod(0o644)
        new.rename(path)

    def write_maps(self, people: list[Person], groups: dict[str, tuple[int, list[Person]]]) -> None:
        self.write("passwd", "".join(p.passwd_line + "\n" for p in people))
        lines = [f"{p.name}:x:{p.gid}:\n" for p in people]
        for name, (gid, members) in groups.items():
            lines.append(f"{name}:x:{gid}:{','.join(m.name for m in members)}\n")
        self.write("group", "".join(lines))

    def write_all(self, data: dict[str, str]) -> None:
        """The whole ConfigMap, as the kubelet swaps in a new version: these files, and no other."""
        for name, text in data.items():
            self.write(name, text)
        for path in self.config.iterdir():
            if not path.name.startswith(".") and path.name not in data:
                path.unlink()

    def authorize(self, person: Person, *keys: Path) -> None:
        self.write(f"{person.name}.keys", "".join(Path(f"{key}.pub").read_text() for key in keys))

    # --- sshd -----------------------------------------------------------------------------------

    def start_user(
        self,
        person: Person,
        home: Path,
        groups: tuple[int, ...] = (),
        mounts: dict[str, Path] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """sshd as `person` (a user's pod: runAsUser/runAsGroup, fsGroup = gid, supplementalGroups
        `groups`), their home mounted at their home directory, and more `mounts` (path -> host) and
        `env` (e.g. SUP_SSH_ALLOW_TCP_FORWARDING)."""
        variables = {
            "SUP_USER": person.name,
            "SUP_UID": str(person.uid),
            "SUP_GID": str(person.gid),
            "SUP_HOME": person.home,
            "SUP_SHELL": "/bin/bash",
            "SUP_SSH_PORT": str(self.port),
            **(env or {}),
        }
        identity = Identity(person.uid, person.gid, (person.gid, *groups))
        volumes = {person.home: home, **(mounts or {})}
        self._start(self.chroot.command(_ENTRYPOINT, identity=identity, env=variables, mounts=volumes))

    def start_group(
        self,
        group: str,
        gid: int,
        homes: Path,
        mounts: dict[str, Path] | None = None,
        env: dict[str, str] | None = None,
        secrets: dict[str, Path] | None = None,
    ) -> None:
        """sshd as root with only the group template's capabilities, for the group's members; more
        `mounts` (path -> host), `secrets` (mounted read-only) and `env` (e.g. SUP_HOST_KEY_DIR)."""
        variables = {"SUP_GROUP": group, "SUP_GID": str(gid), "SUP_SSH_PORT": str(self.port), **(env or {})}
        command = self.chroot.command(
            _ENTRYPOINT,
            env=variables,
            capabilities=GROUP_POD_CAPABILITIES,
            mounts={"/home": homes, **(mounts or {})},
            read_only_mounts=secrets,
        )
        self._start(command)

    def _start(self, command: list[str]) -> None:
        assert self.process is None
        self.process = start(command, self.log)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"sshd exited ({self.process.returncode}):\n{self.log.read_text()}")
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise AssertionError(f"sshd is not listening on {self.port}:\n{self.log.read_text()}")

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None

    # --- clients --------------------------------------------------------------------------------

    def options(self, key: Path, strict: str) -> list[str]:
        return [
            "-F", "/dev/null", "-i", str(key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", f"StrictHostKeyChecking={strict}",
            "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10",
        ]  # fmt: skip

    def ssh(
        self, person: Person, key: Path, command: str, strict: str = "accept-new"
    ) -> subprocess.CompletedProcess[str]:
        argv = ["ssh", *self.options(key, strict), "-p", str(self.port), f"{person.name}@127.0.0.1", command]
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)

    def scp(self, key: Path, *paths: str, legacy: bool = False) -> subprocess.CompletedProcess[str]:
        """scp between this machine and the pod (`127.0.0.1:` paths); SFTP, or the old protocol."""
        protocol = ["-O"] if legacy else []
        argv = ["scp", *self.options(key, "accept-new"), "-P", str(self.port), *protocol, *paths]
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


_ENTRYPOINT = ["/usr/local/sbin/sup-login", "-o", "ListenAddress=127.0.0.1"]
