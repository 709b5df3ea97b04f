"""OIDC access tokens from the real Keycloak on the admin API, and self-service with one's own token."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from keycloak import KeycloakOpenID
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from sup.api import oidc
from sup.config import Settings
from sup.sources.keycloak.runner import full_sync
from tests.ldap.site import Site
from tests.support.keycloak import Realm
from tests.support.keys import ed25519_key


def _oidc(realm: Realm, **extra: object) -> dict[str, object]:
    # The test Keycloak listens on plain http (loopback): SUP reads its keys only when told to.
    return {"issuer": realm.issuer, "audience": "sup", "allow_insecure_http": True, **extra}


def _person(realm: Realm, username: str, *roles: str, **attributes: list[str]) -> str:
    user_id = realm.add_user(username, password=f"pw-{username}", attributes=dict(attributes))
    if roles:
        realm.admin.assign_realm_roles(user_id, [realm.admin.get_realm_role(r) for r in roles])
    return user_id


@pytest.fixture
def roles(realm: Realm) -> None:
    for role in ("sup-admin", "sup-operator", "sup-viewer"):
        realm.admin.create_realm_role({"name": role})


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.usefixtures("roles")
def test_keycloak_tokens_on_the_admin_api(
    realm: Realm, make_settings: Callable[..., Settings], client_for: Callable[[Settings], TestClient]
) -> None:
    _person(realm, "olivia", "sup-operator")
    _person(realm, "victor", "sup-viewer")
    _person(realm, "nobody")
    client = client_for(make_settings(oidc=_oidc(realm)))
    olivia, victor = realm.token("olivia", "pw-olivia"), realm.token("victor", "pw-victor")

    assert client.get("/api/v1/users", headers=_bearer(olivia)).status_code == 200
    created = client.post("/api/v1/users", json={"username": "made_by_olivia"}, headers=_bearer(olivia))
    assert created.status_code == 201, created.text
    audit = client.get("/api/v1/audit", params={"resource_name": "made_by_olivia"}, headers=_bearer(olivia))
    assert audit.json()["items"][0]["actor"] == "oidc:olivia"
    assert client.post("/api/v1/users", json={"username": "x"}, headers=_bearer(victor)).status_code == 403
    assert client.get("/api/v1/tokens", headers=_bearer(olivia)).status_code == 403  # admin only
    answer = client.get("/api/v1/users", headers=_bearer(realm.token("nobody", "pw-nobody")))
    assert answer.status_code == 403 and "grants no SUP role" in answer.text

    # A token whose signature was tampered with, or for another audience, is refused.
    header, payload, signature = olivia.split(".")
    tampered = f"{header}.{payload}.{signature[:-4]}AAAA"
    assert client.get("/api/v1/users", headers=_bearer(tampered)).status_code == 401
    other = client_for(make_settings(oidc=_oidc(realm, audience="someone-else")))
    answer = other.get("/api/v1/users", headers=_bearer(olivia))
    assert answer.status_code == 401 and olivia not in answer.text
    wrong_issuer = client_for(make_settings(oidc=_oidc(realm, issuer=realm.issuer + "x")))
    assert wrong_issuer.get("/api/v1/users", headers=_bearer(olivia)).status_code == 401

    # An ID token (typ ID) is no access token, even where its audience (the login client) is SUP's.
    login = KeycloakOpenID(server_url=realm.server.url, realm_name=realm.name, client_id="sup-login")
    id_token = login.token("olivia", "pw-olivia", scope="openid")["id_token"]
    by_login_client = client_for(make_settings(oidc=_oidc(realm, audience="sup-login")))
    answer = by_login_client.get("/api/v1/users", headers=_bearer(id_token))
    assert answer.status_code == 401 and "ID token" in answer.json()["detail"]

    # An expired token: the realm hands out one-second tokens, and no leeway is allowed.
    realm.admin.update_realm(realm.name, {"accessTokenLifespan": 1})
    short = realm.token("olivia", "pw-olivia")
    strict = client_for(make_settings(oidc=_oidc(realm, leeway_seconds=0)))
    time.sleep(2.5)
    answer = strict.get("/api/v1/users", headers=_bearer(short))
    assert answer.status_code == 401 and "expired" in answer.json()["detail"]


@pytest.mark.usefixtures("roles")
def test_rotated_signing_keys_are_fetched(
    realm: Realm,
    make_settings: Callable[..., Settings],
    client_for: Callable[[Settings], TestClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(oidc, "MIN_REFRESH_SECONDS", 0.0)
    _person(realm, "rita", "sup-admin")
    client = client_for(make_settings(oidc=_oidc(realm, jwks_cache_seconds=3600)))
    assert client.get("/api/v1/tokens", headers=_bearer(realm.token("rita", "pw-rita"))).status_code == 200
    verifier: oidc.OidcVerifier = client.app.state.oidc  # type: ignore[attr-defined]
    assert verifier.fetches == 1
    realm_id = realm.admin.get_realm(realm.name)["id"]
    realm.admin.create_component(
        {
            "name": "rotated",
            "providerId": "rsa-generated",
            "providerType": "org.keycloak.keys.KeyProvider",
            "parentId": realm_id,
            "config": {"priority": ["1000"], "keySize": ["2048"], "algorithm": ["RS256"]},
        }
    )
    assert client.get("/api/v1/tokens", headers=_bearer(realm.token("rita", "pw-rita"))).status_code == 200
    assert verifier.fetches == 2  # the new key id made it re-read the JWKS once


@pytest.mark.usefixtures("roles")
def test_self_service_keys_reach_ldap_beside_the_idp_keys(
    realm: Realm,
    ldap_site: Callable[..., Site],
    store_engine: Engine,
    kc_sessions: sessionmaker[Session],
    client_for: Callable[[Settings], TestClient],
) -> None:
    idp_key, own_key = ed25519_key("from-keycloak"), ed25519_key("my-laptop")
    _person(realm, "sam", sshPublicKey=[idp_key])
    _person(realm, "tess")
    site = ldap_site(oidc=_oidc(realm))
    assert full_sync(site.settings, store_engine, kc_sessions).created == ["sam", "tess"]
    client = client_for(site.settings)
    sam = _bearer(realm.token("sam", "pw-sam"))

    me = client.get("/api/v1/me", headers=sam)
    assert me.status_code == 200, me.text
    assert me.json()["username"] == "sam" and me.json()["status"]["username"] == "sam"
    added = client.post("/api/v1/me/ssh-keys", json={"key": own_key}, headers=sam)
    assert added.status_code == 201, added.text
    keys = {k["origin"]: k for k in client.get("/api/v1/me/ssh-keys", headers=sam).json()}
    assert keys["self"]["key"] == own_key and keys["idp"]["key"] == idp_key
    refused = client.delete(f"/api/v1/me/ssh-keys/{keys['idp']['fingerprint']}", headers=sam)
    assert refused.status_code == 403
    assert client.post("/api/v1/me/ssh-keys", json={"key": "nonsense"}, headers=sam).status_code == 422
    # Sam's token gives no admin rights, and tess sees only her own account.
    assert client.get("/api/v1/users", headers=sam).status_code == 403
    tess = client.get("/api/v1/me", headers=_bearer(realm.token("tess", "pw-tess")))
    assert tess.json()["username"] == "tess" and tess.json()["ssh_keys"] == []

    # A pull keeps the self-managed key; both reach LDAP.
    assert full_sync(site.settings, store_engine, kc_sessions).writes == 0
    site.converge()
    entry = site.entry(site.user_dn("sam"))
    assert entry is not None and sorted(entry["sshPublicKey"]) == sorted([idp_key, own_key])

    gone = client.delete(f"/api/v1/me/ssh-keys/{keys['self']['fingerprint']}", headers=sam)
    assert gone.status_code == 204
    site.converge()
    entry = site.entry(site.user_dn("sam"))
    assert entry is not None and entry["sshPublicKey"] == [idp_key]
