"""SUP as the SSH certificate authority: a person with their own Keycloak access token gets a
certificate for their key, and a real sshd that trusts SUP's CA (as a login pod's does, with a
principals file) lets them in with it; another principal, an expired certificate, another CA and a
suspended person are refused."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ed25519
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.domain import sshcerts
from sup.domain.roles import Role
from sup.sources.keycloak.runner import full_sync
from sup.store.audit import Actor
from sup.tokens.service import create_token
from sup.users.schemas import UserPatch
from sup.users.service import update_user
from tests.support.keycloak import Realm
from tests.support.keys import ed25519_key
from tests.support.sshd import StandInPod, keygen


def _settings(make_settings: Callable[..., Settings], realm: Realm, ca_file: Path, **ca: object) -> Settings:
    oidc = {"issuer": realm.issuer, "audience": "sup", "allow_insecure_http": True}
    return make_settings(oidc=oidc, ssh_ca={"key_file": str(ca_file), **ca})


def test_a_person_gets_a_certificate_sshd_accepts_for_them_only(
    realm: Realm,
    make_settings: Callable[..., Settings],
    client_for: Callable[[Settings], TestClient],
    store_engine: Engine,
    kc_sessions: sessionmaker[Session],
    ca_file: Path,
    pod: StandInPod,
    tmp_path: Path,
) -> None:
    realm.add_user("kim", password="pw-kim")
    realm.add_user("lee", password="pw-lee")
    settings = _settings(make_settings, realm, ca_file, validity_hours=8)
    assert sorted(full_sync(settings, store_engine, kc_sessions).created) == ["kim", "lee"]
    client = client_for(settings)
    kim = {"Authorization": f"Bearer {realm.token('kim', 'pw-kim')}"}

    # The CA's public key, for sshd's TrustedUserCAKeys, is public.
    ca = client.get("/api/v1/ssh-ca")
    assert ca.status_code == 200, ca.text
    (trusted,) = ca.json()["trusted_user_ca_keys"]
    assert trusted.split()[:2] == Path(f"{ca_file}.pub").read_text().split()[:2]
    (pod.directory / "ca.pub").write_text(trusted + "\n")
    # The login pod's account (root here) admits the principals in its file: kim's pod lists kim.
    (pod.directory / "principals").write_text("kim\n")
    pod.start(
        "-o", f"TrustedUserCAKeys={pod.directory / 'ca.pub'}",
        "-o", f"AuthorizedPrincipalsFile={pod.directory / 'principals'}",
    )  # fmt: skip

    key = tmp_path / "id_ed25519"
    public = keygen(key, "kim@laptop")
    answer = client.post("/api/v1/me/ssh-certificate", json={"public_key": public}, headers=kim)
    assert answer.status_code == 201, answer.text
    made = answer.json()
    assert made["principal"] == "kim"
    lifetime = datetime.fromisoformat(made["valid_before"]) - datetime.fromisoformat(made["valid_after"])
    assert lifetime == timedelta(hours=8) + sshcerts.BACKDATE
    certificate = tmp_path / "id_ed25519-cert.pub"
    certificate.write_text(made["certificate"] + "\n")
    entered = pod.login_with(key, certificate)
    assert entered.returncode == 0 and entered.stdout.strip() == "in", entered.stderr

    # The audit log names the serial and the key: what a site needs to find the certificate again.
    audit = client.get("/api/v1/audit", params={"action": "sign_certificate"}, headers=_admin(client))
    (entry,) = audit.json()["items"]
    assert entry["actor"] == "self:kim" and entry["resource_name"] == "kim"
    assert entry["after"]["serial"] == made["serial"] and entry["after"]["key_id"] == made["key_id"]

    # Lee's certificate (principal lee) does not open kim's pod.
    lee = {"Authorization": f"Bearer {realm.token('lee', 'pw-lee')}"}
    lee_key = tmp_path / "lee_ed25519"
    lee_answer = client.post(
        "/api/v1/me/ssh-certificate", json={"public_key": keygen(lee_key, "lee")}, headers=lee
    )
    assert lee_answer.status_code == 201
    lee_certificate = tmp_path / "lee_ed25519-cert.pub"
    lee_certificate.write_text(lee_answer.json()["certificate"] + "\n")
    assert pod.login_with(lee_key, lee_certificate).returncode != 0

    # Expired, and signed by another CA: refused by sshd.
    ca_key = sshcerts.load_ca_key(ca_file.read_bytes())
    old = sshcerts.sign_user_certificate(
        ca_key, public, principal="kim", serial=1, key_id="old", now=datetime.now(UTC) - timedelta(days=2),
        lifetime=timedelta(hours=1), extensions=["permit-pty"],
    )  # fmt: skip
    certificate.write_text(old.line + "\n")
    assert pod.login_with(key, certificate).returncode != 0
    stranger = sshcerts.sign_user_certificate(
        ed25519.Ed25519PrivateKey.generate(), public, principal="kim", serial=2, key_id="forged",
        now=datetime.now(UTC), lifetime=timedelta(hours=1), extensions=["permit-pty"],
    )  # fmt: skip
    certificate.write_text(stranger.line + "\n")
    assert pod.login_with(key, certificate).returncode != 0

    # Bad requests: a longer validity than the site allows, another account's key, a private key.
    too_long = {"public_key": public, "validity_hours": 9}
    assert client.post("/api/v1/me/ssh-certificate", json=too_long, headers=kim).status_code == 422
    taken = client.post("/api/v1/me/ssh-keys", json={"key": public}, headers=kim)
    assert taken.status_code == 201
    stolen = client.post("/api/v1/me/ssh-certificate", json={"public_key": public}, headers=lee)
    assert stolen.status_code == 409 and "kim" not in stolen.text

    # A suspended person gets no certificate.
    with kc_sessions.begin() as session:
        update_user(session, settings, Actor("test", "admin"), "kim", UserPatch(active=False))
    refused = client.post("/api/v1/me/ssh-certificate", json={"public_key": public}, headers=kim)
    assert refused.status_code == 403 and "suspended" in refused.text


def test_without_ssh_ca_settings_nothing_is_signed(
    realm: Realm,
    make_settings: Callable[..., Settings],
    client_for: Callable[[Settings], TestClient],
    store_engine: Engine,
    kc_sessions: sessionmaker[Session],
) -> None:
    realm.add_user("kim", password="pw-kim")
    settings = make_settings(oidc={"issuer": realm.issuer, "audience": "sup", "allow_insecure_http": True})
    full_sync(settings, store_engine, kc_sessions)
    client = client_for(settings)
    kim = {"Authorization": f"Bearer {realm.token('kim', 'pw-kim')}"}
    assert client.get("/api/v1/ssh-ca").status_code == 404
    answer = client.post(
        "/api/v1/me/ssh-certificate", json={"public_key": ed25519_key("kim@laptop")}, headers=kim
    )
    assert answer.status_code == 404 and "ssh_ca" in answer.text


def _admin(client: TestClient) -> dict[str, str]:
    sessions = client.app.state.sessions  # type: ignore[attr-defined]
    with sessions.begin() as session:
        _, secret = create_token(session, Actor("test", "admin"), "auditor", Role.admin)
    return {"Authorization": f"Bearer {secret}"}
