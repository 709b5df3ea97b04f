"""`sup ssh login` as a researcher runs it (its own file, the system's python, their home), with
the device login approved in a "browser" (`Realm.approve_device`) as soon as it prints the link."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.keycloak import Realm

CLIENT = Path(__file__).resolve().parents[2] / "sup" / "ssh_login.py"


@dataclass
class SignedIn:
    done: subprocess.CompletedProcess[str]  # the client's exit status and what it printed
    approved_at: float  # time.monotonic() when the approval in the browser returned
    key: Path  # the key it used (made when missing); its certificate is `{key}-cert.pub`
    ssh_config: Path

    def add_defaults(self) -> None:
        """The person's own settings after SUP's block, as for ssh run from a script: each host's
        key recorded on first sight and trusted after, no prompt, only errors printed."""
        with self.ssh_config.open("a") as config:
            config.write(
                "Host *\n"
                f"    UserKnownHostsFile {self.ssh_config.parent / 'known_hosts'}\n"
                "    StrictHostKeyChecking accept-new\n"
                "    BatchMode yes\n"
                "    LogLevel ERROR\n"
            )

    def ssh(
        self, command: str, host: str = "cluster", timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        """What the person types next: `ssh HOST COMMAND`, with nothing but their ssh config."""
        return subprocess.run(
            ["ssh", "-F", str(self.ssh_config), host, command],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip


def sign_in(sup_url: str, realm: Realm, home: Path, username: str, password: str) -> SignedIn:
    """Run the client for `home` (~/.ssh/id_ed25519 and ~/.ssh/config there) and approve the code as
    `username`."""
    key, ssh_config = home / ".ssh" / "id_ed25519", home / ".ssh" / "config"
    process = subprocess.Popen(
        [sys.executable, str(CLIENT), sup_url, "--key", str(key), "--ssh-config", str(ssh_config),
         "--no-browser"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "HOME": str(home)},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("To sign in, open "), first + (
            process.stderr.read() if process.stderr else ""
        )
        link = first.removeprefix("To sign in, open ").strip()
        page = realm.approve_device(link, username, password)
        approved_at = time.monotonic()
        assert "Device Login Successful" in page, page[-1500:]
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    done = subprocess.CompletedProcess(process.args, process.returncode, first + out, err)
    return SignedIn(done, approved_at, key, ssh_config)
