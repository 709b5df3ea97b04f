"""A real OpenSSH server as the stand-in for a login pod, and OpenSSH client helpers.

The gateway tests relay to this sshd exactly as to a pod's: the person's client authenticates to it
end to end through the tunnel. It runs as root (the tests do) on a free loopback port, with its own
host key and an AuthorizedKeysFile in a temp directory; the person logs in as root (the stand-in has
no accounts of its own). Needs openssh-server (/usr/sbin/sshd and its sftp-server), openssh-client
(ssh, scp, sftp, ssh-keygen, ssh-agent, ssh-add) and rsync (both ends of `rsync -e ssh` run here):
`apt-get install openssh-server openssh-client rsync` (scripts/setup --servers installs them).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.support.processes import stop_process

FORWARDING_SCRIPT = Path(__file__).resolve().parents[2] / "images" / "login" / "sup-sshd-forwarding"
# The login image's sftp server (images/login/sshd_config), when this machine has it.
SFTP_SERVER = (
    "/usr/lib/openssh/sftp-server" if Path("/usr/lib/openssh/sftp-server").exists() else "internal-sftp"
)
SSHD_NEEDED = "the gateway tests need a real sshd as the login pod: apt-get install openssh-server"


class SshdUnavailable(RuntimeError):
    pass


def find_sshd() -> str:
    for candidate in (shutil.which("sshd"), "/usr/sbin/sshd"):
        if candidate and Path(candidate).exists():
            return candidate
    raise SshdUnavailable(SSHD_NEEDED)


def find_client() -> None:
    tools = ("ssh", "scp", "sftp", "ssh-keygen", "ssh-agent", "ssh-add", "rsync")
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        raise SshdUnavailable(f"{', '.join(missing)} missing: apt-get install openssh-client rsync")


def keygen(path: Path, comment: str = "") -> str:
    """An ed25519 key pair at `path` (private) and `path`.pub; the public line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return Path(f"{path}.pub").read_text().strip()


def fingerprint(path: Path) -> str:
    """`SHA256:...` of a public key file, as `ssh-keygen -l` prints it."""
    out = subprocess.run(["ssh-keygen", "-l", "-f", str(path)], check=True, capture_output=True, text=True)
    return out.stdout.split()[1]


def wait_listening(
    port: int, process: subprocess.Popen[Any] | None = None, timeout: float = 20, host: str = "127.0.0.1"
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server on port {port} exited with {process.returncode}")
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout} s")


def forwarding_options(*, tcp: str | None = None, agent: str | None = None) -> list[str]:
    """The sshd options the login image gives for kube.ssh_tcp_forwarding and
    kube.ssh_agent_forwarding, from the image's own script (images/login/sup-sshd-forwarding) with
    the environment SUP's templates set; None: the variable absent."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if tcp is not None:
        env["SUP_SSH_ALLOW_TCP_FORWARDING"] = tcp
    if agent is not None:
        env["SUP_SSH_ALLOW_AGENT_FORWARDING"] = agent
    out = subprocess.run([str(FORWARDING_SCRIPT)], env=env, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


class StandInPod:
    """sshd on 127.0.0.1:`port`, admitting the keys in `authorized_keys` as root; `start` may come
    later than construction (a sleeping pod is started by the wake call)."""

    def __init__(self, directory: Path, port: int, authorized_keys: list[str]) -> None:
        self.sshd = find_sshd()
        self.directory = directory
        self.port = port
        directory.mkdir(parents=True, exist_ok=True)
        host_key = directory / "ssh_host_ed25519_key"
        if not host_key.exists():
            keygen(host_key)
        (directory / "authorized_keys").write_text("".join(f"{line}\n" for line in authorized_keys))
        self.config = directory / "sshd_config"
        self.config.write_text(
            f"Port {port}\n"
            "ListenAddress 127.0.0.1\n"
            f"HostKey {host_key}\n"
            f"AuthorizedKeysFile {directory / 'authorized_keys'}\n"
            "PermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "UsePAM no\n"
            "StrictModes no\n"
            "PidFile none\n"
            "MaxStartups 300\n"
            "MaxSessions 300\n"
            "LogLevel ERROR\n"
            f"Subsystem sftp {SFTP_SERVER}\n"
        )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *options: str) -> None:
        """sshd with `options` after its config file (`-o AllowTcpForwarding=no`, as the login
        image's entrypoint passes them: forwarding_options)."""
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        self.process = subprocess.Popen(
            [self.sshd, "-D", "-e", "-f", str(self.config), *options],
            stdout=subprocess.DEVNULL,
            stderr=open(self.directory / "sshd.log", "ab"),  # noqa: SIM115 - the child holds it
        )
        wait_listening(self.port, self.process)

    def stop(self) -> None:
        stop_process(self.process)

    def login_with(self, key: Path, certificate: Path | None = None) -> subprocess.CompletedProcess[str]:
        """`ssh` as root into this sshd with `key` and its certificate (`KEY-cert.pub` unless named)
        and nothing else, running `echo in`."""
        return subprocess.run(
            ["ssh", "-F", "/dev/null", "-p", str(self.port), "-i", str(key),
             "-o", f"CertificateFile={certificate or f'{key}-cert.pub'}", "-o", "IdentitiesOnly=yes",
             "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
             "-o", "LogLevel=ERROR", "root@127.0.0.1", "echo in"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip


class SshClient:
    """OpenSSH's client with its own config file (`-F`), which `ssh -J` passes on to the jump: the
    key, a throwaway known_hosts, no agent, no prompts."""

    def __init__(self, directory: Path, key: Path, gateway_port: int) -> None:
        self.gateway_port = gateway_port
        known = directory / f"known_hosts-{key.name}"
        self.config = directory / f"ssh_config-{key.name}"
        self.config.write_text(
            "Host *\n"
            f"    IdentityFile {key}\n"
            "    IdentitiesOnly yes\n"
            "    IdentityAgent none\n"
            f"    UserKnownHostsFile {known}\n"
            "    StrictHostKeyChecking no\n"
            "    BatchMode yes\n"
            "    ConnectTimeout 30\n"
        )

    def jump(self, user: str) -> str:
        return f"{user}@127.0.0.1:{self.gateway_port}"

    def ssh(
        self, user: str, pod: str, *command: str, timeout: float = 90
    ) -> subprocess.CompletedProcess[str]:
        """`ssh -J user@gateway root@pod command` (root: the stand-in pod's account)."""
        return subprocess.run(
            ["ssh", "-F", str(self.config), "-J", self.jump(user), f"root@{pod}", *command],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "SSH_AUTH_SOCK": ""},
            check=False,
        )

    def popen(self, *argv: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["ssh", "-F", str(self.config), *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def popen_bytes(self, *argv: str) -> subprocess.Popen[bytes]:
        """`ssh -F config ARGV` with a binary stdin to write to."""
        return subprocess.Popen(
            ["ssh", "-F", str(self.config), *argv], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
        )

    def popen_reader(self, *argv: str) -> subprocess.Popen[bytes]:
        """`ssh -F config ARGV` with no input and a binary stdout to read from."""
        return subprocess.Popen(
            ["ssh", "-F", str(self.config), *argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
        )

    def sftp(
        self, user: str, destination: str, batch: Path, timeout: float = 90
    ) -> subprocess.CompletedProcess[str]:
        """`sftp -J user@gateway -b BATCH destination`: the commands in `batch`, echoed with their output."""
        return subprocess.run(
            ["sftp", "-F", str(self.config), "-J", self.jump(user), "-b", str(batch), destination],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def rsync(self, user: str, *arguments: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        """`rsync -e 'ssh -J user@gateway' ARGUMENTS`, with this client's ssh config."""
        remote_shell = f"ssh -F {self.config} -J {self.jump(user)}"
        return subprocess.run(
            ["rsync", "-e", remote_shell, *arguments],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def scp(self, user: str, *paths: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["scp", "-F", str(self.config), "-J", self.jump(user), *paths],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def direct(
        self, *argv: str, timeout: float = 90, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`ssh -F config ARGV` (no jump); `stdin` as its input, if given."""
        return subprocess.run(
            ["ssh", "-F", str(self.config), *argv],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
