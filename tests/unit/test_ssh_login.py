"""The researchers' one-file client (sup/ssh_login.py): standard library only, the ssh config block
it writes, and how SUP serves it. Its whole run against Keycloak and sshd:
tests/keycloak/test_ssh_login.py."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from sup import ssh_login
from sup.app import create_app
from sup.config import GatewaySettings, Settings
from tests.support.sshd import keygen

SOURCE = Path(ssh_login.__file__)


def test_the_client_imports_the_standard_library_only() -> None:
    tree = ast.parse(SOURCE.read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}  # fmt: skip
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}  # fmt: skip
    assert imported - set(sys.stdlib_module_names) - {"__future__"} == set()


def test_the_block_replaces_its_own_and_nothing_else(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("Host a\n    User x\n")
    config.chmod(0o640)
    first = ssh_login.config_block("cluster", "kim", "gw.example", tmp_path / "k", tmp_path / "k-cert.pub")
    ssh_login.write_config(config, "cluster", first)
    other = ssh_login.config_block("other", "kim", "gw2", tmp_path / "k", tmp_path / "c")
    ssh_login.write_config(config, "other", other)
    second = first.replace("gw.example", "gw.example.org")
    ssh_login.write_config(config, "cluster", second)
    text = config.read_text()
    assert text.startswith("Host a\n    User x\n\n# BEGIN sup cluster")
    assert text.count("# BEGIN sup cluster") == 1 and "gw.example.org" in text and "gw.example\n" not in text
    assert "# BEGIN sup other" in text
    assert config.stat().st_mode & 0o777 == 0o640
    fresh = tmp_path / "new" / "config"
    ssh_login.write_config(fresh, "cluster", first)
    assert fresh.read_text() == first and fresh.stat().st_mode & 0o777 == 0o600


def test_ssh_resolves_the_block_to_the_pod_through_the_gateway_with_the_key_and_certificate(
    tmp_path: Path,
) -> None:
    """What OpenSSH makes of the block (`ssh -G`): the jump to the gateway offers the same key and
    certificate as the hop to the pod (so a --key outside ~/.ssh works at the gateway too), at the
    gateway's port when SUP names one."""
    key, certificate = tmp_path / "k", tmp_path / "k-cert.pub"
    config = tmp_path / "config"
    block = ssh_login.config_block("cluster", "kim", "[2001:db8::7]:2222", key, certificate)
    ssh_login.write_config(config, "cluster", block)

    def resolved(host: str) -> dict[str, str]:
        shown = subprocess.run(
            ["ssh", "-F", str(config), "-G", host], capture_output=True, text=True, check=True
        )
        return dict(line.split(" ", 1) for line in shown.stdout.splitlines() if " " in line)

    pod, gateway = resolved("cluster"), resolved("cluster-gateway")
    assert (pod["hostname"], pod["user"], pod["proxyjump"]) == ("login", "kim", "cluster-gateway")
    assert (gateway["hostname"], gateway["port"], gateway["user"]) == ("2001:db8::7", "2222", "kim")
    for options in (pod, gateway):
        assert options["identityfile"] == str(key) and options["certificatefile"] == str(certificate)
        assert options["identitiesonly"] == "yes"
    assert resolved("cluster")["port"] == "22"


@pytest.mark.parametrize(
    ("public_host", "address"),
    [("login.example.org", ("login.example.org", None)), ("10.0.0.5:2222", ("10.0.0.5", 2222)),
     ("[2001:db8::7]", ("2001:db8::7", None))],
)  # fmt: skip
def test_the_gateway_is_a_host_and_maybe_a_port(public_host: str, address: tuple[str, int | None]) -> None:
    assert ssh_login.gateway_address(public_host) == address
    assert GatewaySettings(public_host=public_host).public_host == public_host


@pytest.mark.parametrize(
    "public_host",
    ["gw\n    ProxyCommand sh", "gw:0", "gw:65536", "2001:db8::7", "gw example", "-oProxyCommand=x"],
)
def test_a_gateway_that_is_more_than_a_name_is_refused_by_sup_and_by_the_client(public_host: str) -> None:
    """SUP hands `gateway.public_host` to every client, which writes it into the person's ssh config:
    SUP refuses such a setting at start, and the client refuses it should SUP send one anyway."""
    with pytest.raises(ssh_login.LoginFailed, match="not a host"):
        ssh_login.gateway_address(public_host)
    with pytest.raises(ValidationError, match="public_host"):
        GatewaySettings(public_host=public_host)


def test_a_principal_that_is_not_a_username_is_not_written(tmp_path: Path) -> None:
    with pytest.raises(ssh_login.LoginFailed, match="principal"):
        ssh_login.config_block("cluster", "kim\nHost *", "gw", tmp_path / "k", tmp_path / "c")


def test_a_host_name_that_would_break_the_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ssh_login.LoginFailed, match="--host"):
        ssh_login.login(
            "http://127.0.0.1:1", key=tmp_path / "k", alias="a b\nHost *", ssh_config=tmp_path / "c",
            out=sys.stdout, open_browser=False,
        )  # fmt: skip
    assert not (tmp_path / "c").exists()


def test_sup_serves_the_client_and_what_it_needs(tmp_path: Path) -> None:
    keygen(tmp_path / "ca", "sup-ca")
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'sup.db'}",
        oidc={"issuer": "https://sso.example.org/realms/r", "audience": "sup"},
        ssh_ca={"key_file": str(tmp_path / "ca"), "login_client_id": "sup-ssh"},
        gateway={"public_host": "login.cluster.example"},
    )
    with TestClient(create_app(settings)) as client:
        ca = client.get("/api/v1/ssh-ca").json()
        assert ca["login"] == {
            "issuer": "https://sso.example.org/realms/r",
            "client_id": "sup-ssh",
            "gateway_host": "login.cluster.example",
        }
        served = client.get("/api/v1/ssh-ca/client")
        assert served.status_code == 200 and served.content == SOURCE.read_bytes()
        assert 'filename="sup-ssh-login"' in served.headers["content-disposition"]
    assert settings.ssh_ca is not None
    no_login = settings.ssh_ca.model_copy(update={"login_client_id": None})
    without_login = settings.model_copy(update={"ssh_ca": no_login})
    with TestClient(create_app(without_login)) as client:
        assert client.get("/api/v1/ssh-ca").json()["login"] is None
