"""`sup ssh login` (the one-file client, sup/ssh_login.py) against a real `sup serve` and the real
Keycloak's device authorization grant, approved as a person does in the browser; the certificate it
brings home lets OpenSSH's client into a real sshd that trusts SUP's CA."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.sources.keycloak.runner import full_sync
from sup.store.session import make_engine
from tests.support.cli import run_sup, sup_env
from tests.support.keycloak import Realm
from tests.support.ports import free_port
from tests.support.server import SupServer
from tests.support.ssh_login_client import CLIENT, sign_in
from tests.support.sshd import StandInPod, keygen

GATEWAY = "gw.example.test"


@pytest.fixture
def site(realm: Realm, tmp_path: Path) -> Iterator[tuple[SupServer, Path]]:
    """`sup serve` with the realm as its identity provider and SUP's CA on; kim is provisioned."""
    realm.add_device_client("sup-ssh")
    realm.add_user("kim", password="pw-kim")
    ca_key = tmp_path / "ssh_ca"
    keygen(ca_key, "sup-ca")
    database_url = f"sqlite:///{tmp_path / 'sup.db'}"
    config = {
        "database_url": database_url,
        "keycloak": {**realm.settings(), "interval_seconds": 0},
        "oidc": {"issuer": realm.issuer, "audience": "sup", "allow_insecure_http": True},
        "ssh_ca": {"key_file": str(ca_key), "login_client_id": "sup-ssh", "validity_hours": 2},
        "gateway": {"public_host": GATEWAY},
    }
    (tmp_path / "sup.yaml").write_text(yaml.safe_dump(config))
    env = sup_env(SUP_CONFIG=str(tmp_path / "sup.yaml"))
    assert run_sup("db", "upgrade", env=env).returncode == 0
    engine = make_engine(database_url)
    try:
        settings = Settings.model_validate(config)
        assert full_sync(settings, engine, sessionmaker[Session](engine)).created == ["kim"]
    finally:
        engine.dispose()
    server = SupServer(env, tmp_path / "serve.log")
    try:
        yield server, ca_key
    finally:
        server.stop()


def _login(server: SupServer, realm: Realm, home: Path) -> subprocess.CompletedProcess[str]:
    return sign_in(server.url, realm, home, "kim", "pw-kim").done


def test_sup_ssh_login_brings_home_a_certificate_sshd_takes(
    site: tuple[SupServer, Path], realm: Realm, tmp_path: Path
) -> None:
    server, ca_key = site
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    config = home / ".ssh" / "config"
    config.write_text("Host other\n    HostName other.example\n")

    done = _login(server, realm, home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "signed in as kim" in done.stdout and "next: ssh cluster" in done.stdout
    key = home / ".ssh" / "id_ed25519"
    assert (key.stat().st_mode & 0o777) == 0o600
    certificate = Path(f"{key}-cert.pub")
    shown = subprocess.run(
        ["ssh-keygen", "-L", "-f", str(certificate)], capture_output=True, text=True, check=True
    )
    assert shown.stdout.split("Principals:")[1].split()[0] == "kim"

    # `ssh cluster` resolves to the pod through the gateway, with the key and its certificate.
    def resolved(host: str) -> dict[str, str]:
        shown = subprocess.run(
            ["ssh", "-F", str(config), "-G", host], capture_output=True, text=True, check=True
        )
        return dict(line.split(" ", 1) for line in shown.stdout.splitlines() if " " in line)

    options = resolved("cluster")
    assert options["hostname"] == "login" and options["user"] == "kim"
    assert options["proxyjump"] == "cluster-gateway"
    assert options["certificatefile"] == str(certificate)
    jump = resolved("cluster-gateway")
    assert (jump["hostname"], jump["user"], jump["certificatefile"]) == (GATEWAY, "kim", str(certificate))
    assert config.read_text().startswith("Host other\n    HostName other.example\n")

    # The certificate opens a pod whose sshd trusts SUP's CA (the stand-in logs in as root; its
    # principals file names kim, as a login pod's account is named).
    pod = StandInPod(tmp_path / "pod", free_port(), authorized_keys=[])
    (pod.directory / "ca.pub").write_text(Path(f"{ca_key}.pub").read_text())
    (pod.directory / "principals").write_text("kim\n")
    pod.start("-o", f"TrustedUserCAKeys={pod.directory / 'ca.pub'}",
              "-o", f"AuthorizedPrincipalsFile={pod.directory / 'principals'}")  # fmt: skip
    try:
        entered = subprocess.run(
            ["ssh", "-F", str(config), "-o", "ProxyJump=none", "-o", "HostName=127.0.0.1",
             "-o", f"Port={pod.port}", "-o", "User=root", "-o", "StrictHostKeyChecking=no",
             "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "cluster", "echo in"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    finally:
        pod.stop()
    assert entered.returncode == 0 and entered.stdout == "in\n", entered.stderr

    # Again (the next day): the same key, a new certificate, the block replaced, not repeated.
    before = key.read_bytes()
    again = _login(server, realm, home)
    assert again.returncode == 0, again.stdout + again.stderr
    assert key.read_bytes() == before and "made a new key" not in again.stdout
    assert config.read_text().count("# BEGIN sup cluster") == 1


def test_a_site_without_the_login_says_so(tmp_path: Path) -> None:
    """The client against a SUP that signs nothing: a clear message, exit 1, nothing written."""
    done = subprocess.run(
        [sys.executable, str(CLIENT), "http://127.0.0.1:1", "--key", str(tmp_path / "k"),
         "--ssh-config", str(tmp_path / "config"), "--no-browser"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and "cannot reach SUP" in done.stderr
    assert list(tmp_path.iterdir()) == []
