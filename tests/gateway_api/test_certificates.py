"""The routes answer names the CAs whose certificates the gateway takes (ssh_ca), the signing one
first, then `also_trusted`; with `plain_keys: false` it names no uploaded key at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from sup.config import Settings
from tests.conftest import bearer
from tests.gateway_api.conftest import NAMESPACE
from tests.support import keys
from tests.support.sshd import fingerprint, keygen

OLD_CA = keys.ed25519_key("the previous ca")


@pytest.fixture(params=[True, False], ids=["plain-keys", "certificates-only"])
def settings(request: pytest.FixtureRequest, database_url: str, tmp_path: Path) -> Settings:
    keygen(tmp_path / "ca", "sup-ca")
    ca = {"key_file": str(tmp_path / "ca"), "also_trusted": [OLD_CA], "plain_keys": request.param}
    return Settings(
        database_url=database_url,
        kube={"namespace": NAMESPACE, "kubeconfig": "/nonexistent"},
        gateway={"idle_seconds": 600},
        ssh_ca=ca,
    )


def test_routes_name_the_trusted_cas_and_honour_plain_keys(
    client: TestClient, admin: dict[str, str], tokens: dict[str, str], settings: Settings, tmp_path: Path
) -> None:
    key = keys.ed25519_key("kim@laptop")
    assert client.post(
        "/api/v1/users", json={"username": "kim", "ssh_public_keys": [key]}, headers=admin
    ).is_success
    answer = client.get("/api/v1/gateway/routes/kim", headers=bearer(tokens["gateway"]))
    assert answer.status_code == 200, answer.text
    old = tmp_path / "old.pub"
    old.write_text(OLD_CA + "\n")
    assert answer.json()["certificate_authorities"] == [fingerprint(tmp_path / "ca.pub"), fingerprint(old)]
    assert settings.ssh_ca is not None
    plain = [fingerprint_of(key, tmp_path)] if settings.ssh_ca.plain_keys else []
    assert answer.json()["fingerprints"] == plain


def fingerprint_of(line: str, directory: Path) -> str:
    path = directory / "key.pub"
    path.write_text(line + "\n")
    return fingerprint(path)


def test_a_malformed_also_trusted_key_is_refused_at_startup(tmp_path: Path) -> None:
    keygen(tmp_path / "ca", "sup-ca")
    with pytest.raises(ValueError, match=r"also_trusted\[0\]"):
        Settings(ssh_ca={"key_file": str(tmp_path / "ca"), "also_trusted": ["ssh-ed25519 not-base64"]})
