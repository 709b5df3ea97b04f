"""Self-service for people an identity provider pushed over SCIM (`oidc.accounts`), with the real
Keycloak as the token issuer: a person the `okta` connection pushed, whose externalId is a claim
of their access token, gets an SSH certificate for their SCIM account once `oidc.accounts` names
that connection, and 404 while it does not; a token that matches the Keycloak pull's account and
a connection's both gets 409 and nothing is signed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.domain.roles import Role
from sup.sources.keycloak.runner import full_sync
from sup.store.audit import Actor
from sup.store.models import User
from sup.tokens.service import create_token
from tests.support.keycloak import Realm
from tests.support.keys import ed25519_key

SCIM_USER = "urn:ietf:params:scim:schemas:core:2.0:User"
ADMIN = Actor("test", "admin")


def _settings(make_settings: Callable[..., Settings], realm: Realm, ca_file: Path, **oidc: Any) -> Settings:
    issuer = {"issuer": realm.issuer, "audience": "sup", "allow_insecure_http": True, **oidc}
    return make_settings(oidc=issuer, ssh_ca={"key_file": str(ca_file)})


def _token(sessions: sessionmaker[Session], name: str, role: Role) -> dict[str, str]:
    with sessions.begin() as session:
        _, secret = create_token(session, ADMIN, name, role)
    return {"Authorization": f"Bearer {secret}"}


def _push(client: TestClient, sessions: sessionmaker[Session], user_name: str, external_id: str) -> str:
    """The `okta` connection (a static SCIM token of that name) pushes a person: their username."""
    headers = {**_token(sessions, "okta", Role.scim), "Content-Type": "application/scim+json"}
    body = {"schemas": [SCIM_USER], "userName": user_name, "externalId": external_id, "active": True}
    created = client.post("/scim/v2/Users", json=body, headers=headers)
    assert created.status_code == 201, created.text
    with sessions() as session:
        mine = (User.source == "scim:okta") & (User.external_id == external_id)
        return session.scalars(select(User.username).where(mine)).one()


def _certificate(client: TestClient, token: str) -> Any:
    return client.post(
        "/api/v1/me/ssh-certificate",
        json={"public_key": ed25519_key("laptop")},
        headers={"Authorization": f"Bearer {token}"},
    )


def _signings(client: TestClient, auditor: dict[str, str]) -> list[dict[str, Any]]:
    audit = client.get("/api/v1/audit", params={"action": "sign_certificate"}, headers=auditor)
    assert audit.status_code == 200, audit.text
    items: list[dict[str, Any]] = audit.json()["items"]
    return items


def test_a_person_pushed_over_scim_gets_a_certificate_once_oidc_accounts_names_the_connection(
    realm: Realm,
    make_settings: Callable[..., Settings],
    client_for: Callable[[Settings], TestClient],
    kc_sessions: sessionmaker[Session],
    ca_file: Path,
) -> None:
    # Okta's way: its own person id travels as SCIM externalId and as the token claim `uid`.
    realm.add_claim("oktaId", "uid")
    realm.add_user("kim", password="pw-kim", attributes={"oktaId": ["00u-kim-okta"]})
    realm.add_user("lee", password="pw-lee", attributes={"oktaId": ["00u-lee-okta"]})
    default = client_for(_settings(make_settings, realm, ca_file))
    kim_okta = _push(default, kc_sessions, "kim.okta", "00u-kim-okta")
    kim = realm.token("kim", "pw-kim")

    # oidc.accounts by default: the Keycloak pull's users only (none here), so no certificate.
    refused = _certificate(default, kim)
    assert refused.status_code == 404, refused.text

    named = _settings(make_settings, realm, ca_file, accounts={"keycloak": "sub", "scim:okta": "uid"})
    client = client_for(named)
    auditor = _token(kc_sessions, "auditor", Role.admin)
    made = _certificate(client, kim)
    assert made.status_code == 201, made.text
    assert made.json()["principal"] == kim_okta
    (entry,) = _signings(client, auditor)
    assert entry["actor"] == "self:kim" and entry["resource_name"] == kim_okta
    assert entry["after"]["serial"] == made.json()["serial"]

    # Lee holds a token too, but no connection pushed them: no account, nothing signed.
    assert _certificate(client, realm.token("lee", "pw-lee")).status_code == 404
    assert len(_signings(client, auditor)) == 1


def test_a_token_that_matches_two_sources_accounts_gets_a_409_and_no_certificate(
    realm: Realm,
    make_settings: Callable[..., Settings],
    client_for: Callable[[Settings], TestClient],
    store_engine: Engine,
    kc_sessions: sessionmaker[Session],
    ca_file: Path,
) -> None:
    # The Keycloak pull provisions sam (external_id: Keycloak's user id, the token's sub), and the
    # okta connection pushes a second account whose externalId is that same id.
    sam_id = realm.add_user("sam", password="pw-sam")
    settings = _settings(make_settings, realm, ca_file, accounts={"keycloak": "sub", "scim:okta": "sub"})
    assert full_sync(settings, store_engine, kc_sessions).created == ["sam"]
    client = client_for(settings)
    sam_okta = _push(client, kc_sessions, "sam.okta", sam_id)

    answer = _certificate(client, realm.token("sam", "pw-sam"))
    assert answer.status_code == 409, answer.text
    assert "keycloak, scim:okta" in answer.json()["detail"]
    assert sam_okta not in answer.text and sam_id not in answer.text
    assert _signings(client, _token(kc_sessions, "auditor", Role.admin)) == []

    # With only the Keycloak source named, sam is the Keycloak pull's sam again.
    only_keycloak = client_for(_settings(make_settings, realm, ca_file))
    made = _certificate(only_keycloak, realm.token("sam", "pw-sam"))
    assert made.status_code == 201 and made.json()["principal"] == "sam", made.text
