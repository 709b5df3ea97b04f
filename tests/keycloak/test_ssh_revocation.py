"""The revocation list for sshd servers SUP does not run (GET /api/v1/ssh-ca/revoked-keys): a
suspended person's unexpired certificate is listed by its key, and a real sshd with the served list
as its `RevokedKeys` file refuses the certificate it took while the person was active."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.domain.roles import Role
from sup.sources.keycloak.runner import full_sync
from sup.ssh_ca import router as ssh_ca_router
from sup.store.audit import Actor
from sup.tokens.service import create_token
from tests.support.keycloak import Realm
from tests.support.sshd import StandInPod, keygen
from tests.support.sshd import fingerprint as sshd_fingerprint

LIST = "/api/v1/ssh-ca/revoked-keys"


@pytest.fixture
def site(
    realm: Realm,
    make_settings: Callable[..., Settings],
    client_for: Callable[[Settings], TestClient],
    store_engine: Engine,
    kc_sessions: sessionmaker[Session],
    ca_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> TestClient:
    """SUP signing certificates, with kim and lee provisioned from the realm; the list is made
    anew at each request (its reuse for a few seconds: tests/unit/test_revocation.py)."""
    monkeypatch.setattr(ssh_ca_router, "REVOKED_CACHE_SECONDS", 0.0)
    realm.add_user("kim", password="pw-kim")
    realm.add_user("lee", password="pw-lee")
    oidc = {"issuer": realm.issuer, "audience": "sup", "allow_insecure_http": True}
    settings = make_settings(oidc=oidc, ssh_ca={"key_file": str(ca_file), "validity_hours": 8})
    assert sorted(full_sync(settings, store_engine, kc_sessions).created) == ["kim", "lee"]
    return client_for(settings)


def _certify(client: TestClient, realm: Realm, name: str, key: Path) -> str:
    """A certificate for `name`'s new key at `key` (written beside it as KEY-cert.pub); the key's
    public line without its comment."""
    public = keygen(key, f"{name}@laptop")
    token = realm.token(name, f"pw-{name}")
    answer = client.post(
        "/api/v1/me/ssh-certificate",
        json={"public_key": public},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 201, answer.text
    Path(f"{key}-cert.pub").write_text(answer.json()["certificate"] + "\n")
    return " ".join(public.split()[:2])


def _admin(client: TestClient) -> dict[str, str]:
    sessions = client.app.state.sessions  # type: ignore[attr-defined]
    with sessions.begin() as session:
        _, secret = create_token(session, Actor("test", "admin"), "admin", Role.admin)
    return {"Authorization": f"Bearer {secret}"}


def _set_active(client: TestClient, admin: dict[str, str], name: str, active: bool) -> None:
    changed = client.patch(f"/api/v1/users/{name}", json={"active": active}, headers=admin)
    assert changed.status_code == 200, changed.text


def _listed(client: TestClient) -> list[str]:
    """The served list's keys; its first line is the `#` comment, which counts them."""
    answer = client.get(LIST)  # no token
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    assert answer.headers["cache-control"] == "no-cache"
    lines: list[str] = answer.text.splitlines()
    header, *keys = lines
    assert header.startswith("# SUP revoked keys, generated ") and header.endswith(f"; {len(keys)} keys")
    return keys


def _log(pod: StandInPod) -> str:
    return (pod.directory / "sshd.log").read_text()


def test_a_suspended_persons_key_is_listed_until_they_are_active_again(
    site: TestClient, realm: Realm, tmp_path: Path
) -> None:
    kim_laptop = _certify(site, realm, "kim", tmp_path / "kim_laptop")
    kim_desk = _certify(site, realm, "kim", tmp_path / "kim_desk")
    _certify(site, realm, "lee", tmp_path / "lee")
    admin = _admin(site)
    # The audit entry names the key (no comment): what the list is made from.
    audit = site.get("/api/v1/audit", params={"action": "sign_certificate"}, headers=admin).json()
    assert sorted(e["after"]["public_key"] for e in audit["items"] if e["resource_name"] == "kim") == sorted(
        [kim_laptop, kim_desk]
    )
    assert _listed(site) == []

    _set_active(site, admin, "kim", False)
    assert _listed(site) == sorted([kim_laptop, kim_desk])  # both of kim's, not lee's
    first = site.get(LIST)
    assert first.headers["etag"] == site.get(LIST).headers["etag"]

    _set_active(site, admin, "kim", True)
    assert _listed(site) == []
    assert site.get(LIST).headers["etag"] != first.headers["etag"]


def test_without_ssh_ca_settings_there_is_no_list(
    realm: Realm, make_settings: Callable[..., Settings], client_for: Callable[[Settings], TestClient]
) -> None:
    oidc = {"issuer": realm.issuer, "audience": "sup", "allow_insecure_http": True}
    client = client_for(make_settings(oidc=oidc))
    answer = client.get(LIST)
    assert answer.status_code == 404 and "ssh_ca" in answer.text


def test_a_real_sshd_refuses_the_certificate_once_the_served_list_names_its_key(
    site: TestClient, realm: Realm, pod: StandInPod, tmp_path: Path
) -> None:
    """OpenSSH's `RevokedKeys` with a plain key list: a listed key revokes its certificates too,
    the `#` line is skipped, and a missing file refuses every key."""
    kim = tmp_path / "kim_ed25519"
    _certify(site, realm, "kim", kim)
    fingerprint = sshd_fingerprint(Path(f"{kim}.pub"))
    (pod.directory / "ca.pub").write_text("".join(f"{k}\n" for k in site.get("/api/v1/ssh-ca").json()[
        "trusted_user_ca_keys"]))  # fmt: skip
    (pod.directory / "principals").write_text("kim\n")
    revoked = pod.directory / "sup_revoked"
    revoked.write_bytes(site.get(LIST).content)  # only the comment line: nothing revoked yet
    assert revoked.read_text().startswith("# SUP revoked keys") and len(revoked.read_text().splitlines()) == 1
    pod.start(
        "-o", f"TrustedUserCAKeys={pod.directory / 'ca.pub'}",
        "-o", f"AuthorizedPrincipalsFile={pod.directory / 'principals'}",
        "-o", f"RevokedKeys={revoked}",
    )  # fmt: skip
    entered = pod.login_with(kim)
    assert entered.returncode == 0 and entered.stdout.strip() == "in", entered.stderr
    revoked.write_text("")  # an empty file revokes nothing either
    assert pod.login_with(kim).returncode == 0

    admin = _admin(site)
    _set_active(site, admin, "kim", False)
    revoked.write_bytes(site.get(LIST).content)
    assert len(revoked.read_text().splitlines()) == 2
    refused = pod.login_with(kim)
    assert refused.returncode != 0 and "in" not in refused.stdout
    # Refused for the list, the certificate itself by its plain key's line.
    assert f"ED25519-CERT {fingerprint} revoked by file {revoked}" in _log(pod)

    # sshd reads the file at each login: a missing file refuses every key (so a failed fetch must
    # keep the old file, not remove it).
    _set_active(site, admin, "kim", True)
    revoked.write_bytes(site.get(LIST).content)
    assert pod.login_with(kim).returncode == 0
    revoked.unlink()
    assert pod.login_with(kim).returncode != 0
    assert f"ED25519-CERT {fingerprint} in revoked keys file {revoked}: No such file" in _log(pod)
