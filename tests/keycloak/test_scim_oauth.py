"""SCIM connections that push with OAuth access tokens issued by the real Keycloak (`scim.oauth`):
checked at Keycloak's RFC 7662 introspection endpoint, or verified by the realm's JWKS."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from keycloak import KeycloakOpenID
from sqlalchemy import select

from sup.config import Settings
from sup.domain.roles import Role
from sup.scim.runtime import runtime
from sup.store.audit import Actor
from sup.store.models import User
from sup.tokens.service import create_token
from tests.support.keycloak import KeycloakServer, Realm

SCIM_USER = "urn:ietf:params:scim:schemas:core:2.0:User"


def _pusher(
    realm: Realm, client_id: str, *, audience: str | None = "sup", lifespan: int | None = None
) -> str:
    """A confidential client an IdP would push with (client credentials); its secret. With
    `audience`, its tokens name that client in `aud`, as an audience mapper makes them."""
    mappers = []
    if audience is not None:
        mappers.append(
            {
                "name": f"audience-{audience}",
                "protocol": "openid-connect",
                "protocolMapper": "oidc-audience-mapper",
                "config": {"included.client.audience": audience, "access.token.claim": "true"},
            }
        )
    attributes = {"access.token.lifespan": str(lifespan)} if lifespan is not None else {}
    internal = realm.admin.create_client(
        {
            "clientId": client_id,
            "enabled": True,
            "publicClient": False,
            "serviceAccountsEnabled": True,
            "standardFlowEnabled": False,
            "protocol": "openid-connect",
            "protocolMappers": mappers,
            "attributes": attributes,
        }
    )
    return str(realm.admin.get_client_secrets(internal)["value"])


def _token(realm: Realm, client_id: str, secret: str) -> str:
    client = KeycloakOpenID(
        server_url=realm.server.url, realm_name=realm.name, client_id=client_id, client_secret_key=secret
    )
    return str(client.token(grant_type="client_credentials")["access_token"])


def _introspecting(realm: Realm, **extra: Any) -> dict[str, Any]:
    """A connection checked at the realm's introspection endpoint, with SUP's client `sup`."""
    return {
        "issuer": realm.issuer,
        "introspection_url": f"{realm.issuer}/protocol/openid-connect/token/introspect",
        "client_id": realm.client_id,
        "client_secret": realm.client_secret,
        "allow_insecure_http": True,  # the test Keycloak listens on plain http (loopback)
        **extra,
    }


def _push(client: TestClient, token: str, username: str) -> httpx.Response:
    response: httpx.Response = client.post(
        "/scim/v2/Users",
        json={"schemas": [SCIM_USER], "userName": username, "active": True},
        headers={"Authorization": f"Bearer {token}"},
    )
    return response


def test_a_connection_pushes_with_tokens_keycloak_vouches_for(
    realm: Realm,
    make_settings: Callable[..., Settings],
    client_for: Callable[[Settings], TestClient],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = _pusher(realm, "idp-push")
    client = client_for(make_settings(scim={"oauth": {"kc": _introspecting(realm, cache_seconds=1)}}))
    oauth = runtime(client.app).oauth  # type: ignore[arg-type]
    token = _token(realm, "idp-push", secret)

    created = _push(client, token, "ada")
    assert created.status_code == 201, created.text
    user = client.get("/scim/v2/Users", params={"filter": 'userName eq "ada"'}, headers=_auth(token))
    assert user.status_code == 200 and user.json()["totalResults"] == 1
    assert oauth.introspections == 1  # the second request with the token was answered from the cache
    # What the connection writes is its own, as with a static token named kc.
    assert _store_source(client, "ada") == "scim:kc"

    # Revoked at Keycloak: refused once the cache's second has passed.
    revoke = httpx.post(
        f"{realm.issuer}/protocol/openid-connect/revoke",
        data={"token": token, "token_type_hint": "access_token"},
        auth=("idp-push", secret),
    )
    assert revoke.status_code == 200, revoke.text
    time.sleep(1.2)
    refused = _push(client, token, "ada2")
    assert refused.status_code == 401, refused.text
    assert "not active" in refused.json()["detail"]
    assert refused.headers["WWW-Authenticate"].startswith("Bearer")

    # A token whose aud does not name SUP's client, and one from another realm, are refused; the
    # other realm's never reaches the introspection endpoint (its issuer is no connection's).
    stranger_secret = _pusher(realm, "stranger", audience=None)
    answer = _push(client, _token(realm, "stranger", stranger_secret), "eve")
    assert answer.status_code == 401 and "wrong aud" in answer.json()["detail"]
    other = realm.server.new_realm(admin_events=False)
    try:
        other_secret = _pusher(other, "idp-push")
        asked = oauth.introspections
        answer = _push(client, _token(other, "idp-push", other_secret), "mallory")
        assert answer.status_code == 401 and "issuer" in answer.json()["detail"]
        assert oauth.introspections == asked
    finally:
        realm.server.admin().delete_realm(other.name)

    # A made-up opaque token is a 401 too, and nobody was created by the refused requests.
    assert _push(client, "not-a-token-at-all", "trudy").status_code == 401
    assert [_store_source(client, n) for n in ("ada2", "eve", "mallory", "trudy")] == [None] * 4

    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert token not in logged and realm.client_secret not in logged and secret not in logged


def test_an_expired_token_is_refused_even_if_cached(
    realm: Realm, make_settings: Callable[..., Settings], client_for: Callable[[Settings], TestClient]
) -> None:
    secret = _pusher(realm, "idp-short", lifespan=2)
    connection = _introspecting(realm, cache_seconds=600, leeway_seconds=0)
    client = client_for(make_settings(scim={"oauth": {"kc": connection}}))
    token = _token(realm, "idp-short", secret)
    assert _push(client, token, "bea").status_code == 201
    time.sleep(3.2)
    answer = _push(client, token, "bea2")
    assert answer.status_code == 401, answer.text  # the cache never outlives the token's exp


def test_wrong_introspection_credentials_are_a_503_not_a_401(
    realm: Realm,
    make_settings: Callable[..., Settings],
    client_for: Callable[[Settings], TestClient],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An IdP takes 401 as its own credential failing (Entra ID quarantines the job): when SUP cannot
    ask, the IdP gets 503 and retries, and the operator's log says what to fix."""
    secret = _pusher(realm, "idp-push")
    connection = _introspecting(realm, client_secret="wrong-secret")
    client = client_for(make_settings(scim={"oauth": {"kc": connection}}))
    answer = _push(client, _token(realm, "idp-push", secret), "cy")
    assert answer.status_code == 503, answer.text
    assert answer.headers.get("Retry-After")
    assert any("client_id and client_secret" in r.getMessage() for r in caplog.records)
    assert not any("wrong-secret" in r.getMessage() for r in caplog.records)


def test_a_jwks_connection_verifies_keycloak_jwts_locally(
    realm: Realm,
    keycloak: KeycloakServer,
    make_settings: Callable[..., Settings],
    client_for: Callable[[Settings], TestClient],
) -> None:
    secret = _pusher(realm, "idp-push")
    connection = {"issuer": realm.issuer, "audience": "sup", "allow_insecure_http": True}
    client = client_for(make_settings(scim={"oauth": {"entra": connection}}))
    token = _token(realm, "idp-push", secret)
    assert _push(client, token, "dora").status_code == 201
    assert _store_source(client, "dora") == "scim:entra"
    assert runtime(client.app).oauth.introspections == 0  # type: ignore[arg-type]

    # Tampered with, or for another audience: refused.
    header, payload, signature = token.split(".")
    assert _push(client, f"{header}.{payload}.{signature[:-4]}AAAA", "dora2").status_code == 401
    elsewhere = client_for(make_settings(scim={"oauth": {"entra": {**connection, "audience": "other"}}}))
    answer = _push(elsewhere, token, "dora3")
    assert answer.status_code == 401 and "aud" in answer.json()["detail"]


def test_static_scim_tokens_still_work_beside_oauth_connections(
    realm: Realm, make_settings: Callable[..., Settings], client_for: Callable[[Settings], TestClient]
) -> None:
    client = client_for(make_settings(scim={"oauth": {"kc": _introspecting(realm)}}))
    admin = _admin_token(client)
    made = client.post("/api/v1/tokens", json={"name": "okta", "role": "scim"}, headers=_auth(admin))
    assert made.status_code == 201, made.text
    assert _push(client, made.json()["token"], "eli").status_code == 201
    assert _store_source(client, "eli") == "scim:okta"
    # An admin token is no SCIM credential, whichever way SCIM authenticates.
    assert _push(client, admin, "fay").status_code == 403


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _admin_token(client: TestClient) -> str:
    sessions = client.app.state.sessions  # type: ignore[attr-defined]
    with sessions.begin() as session:
        _, secret = create_token(session, Actor("test", "admin"), f"admin-{time.monotonic_ns()}", Role.admin)
    return secret


def _store_source(client: TestClient, username: str) -> str | None:
    """The source the store records for `username` (None: no such user)."""
    sessions = client.app.state.sessions  # type: ignore[attr-defined]
    with sessions.begin() as session:
        source: str | None = session.scalars(
            select(User.source).where(User.username == username)
        ).one_or_none()
    return source
