"""OIDC tokens on the API with a local issuer (its keys made in the test): bad role claims are a 401,
the write rate limit counts a person (not the header's spelling), and self-service (/api/v1/me) finds
only the account `oidc.accounts` leads to (by default the Keycloak source's account of the token's
subject), refuses when two do, and names nobody else's."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, update
from sqlalchemy.orm import Session, sessionmaker

from sup.app import create_app
from sup.config import Settings
from sup.store.models import User
from tests.conftest import bearer
from tests.support.keys import ed25519_key
from tests.support.oidc_issuer import LocalIssuer


@pytest.fixture
def issuer() -> LocalIssuer:
    return LocalIssuer()


def _client(settings: Settings, engine: Engine, issuer: LocalIssuer, **changes: Any) -> TestClient:
    settings = settings.model_copy(update={"oidc": issuer.settings(), **changes})
    app = create_app(settings, engine)
    app.state.oidc = issuer.verifier()  # its documents come from the test, not over HTTP
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture
def client(settings: Settings, engine: Engine, issuer: LocalIssuer) -> Iterator[TestClient]:
    with _client(settings, engine, issuer) as client:
        yield client


@pytest.fixture
def strict_client(settings: Settings, engine: Engine, issuer: LocalIssuer) -> Iterator[TestClient]:
    """Two writes per client, then 429 for a long while."""
    limit = settings.api.rate_limit.model_copy(update={"requests_per_second": 0.001, "burst": 2})
    api = settings.api.model_copy(update={"rate_limit": limit})
    with _client(settings, engine, issuer, api=api) as client:
        yield client


def test_a_token_whose_realm_access_is_a_list_is_a_401_with_the_reason(
    client: TestClient, issuer: LocalIssuer
) -> None:
    answer = client.get("/api/v1/users", headers=bearer(issuer.token(realm_access=["sup-admin"])))
    assert answer.status_code == 401, answer.text
    assert "realm_access" in answer.json()["detail"]
    # Nothing else broke: the same person's well-formed token works.
    assert client.get("/api/v1/users", headers=bearer(issuer.token())).status_code == 200


def test_id_tokens_and_tokens_not_valid_yet_are_a_401(client: TestClient, issuer: LocalIssuer) -> None:
    answer = client.get("/api/v1/users", headers=bearer(issuer.token(typ="ID")))
    assert answer.status_code == 401 and "ID token" in answer.json()["detail"]
    answer = client.get("/api/v1/users", headers=bearer(issuer.token(nbf=2**40)))
    assert answer.status_code == 401 and "not valid yet" in answer.json()["detail"]


def _writes(client: TestClient, *authorizations: str) -> list[int]:
    """One group created per Authorization header value: the statuses."""
    return [
        client.post(
            "/api/v1/groups", json={"name": f"g{uuid.uuid4().hex[:8]}"}, headers={"Authorization": value}
        ).status_code
        for value in authorizations
    ]


def test_the_scheme_spelling_of_a_sup_token_does_not_make_a_new_client(
    strict_client: TestClient, tokens: dict[str, str]
) -> None:
    secret = tokens["admin"]
    assert _writes(strict_client, f"Bearer {secret}", f"bearer {secret}", f"BEARER   {secret}") == [
        201,
        201,
        429,
    ]
    assert _writes(strict_client, f"Bearer {tokens['operator']}") == [201]  # another token: its own


def test_every_token_of_one_person_shares_their_bucket(
    strict_client: TestClient, issuer: LocalIssuer
) -> None:
    pat = [issuer.token("pat", jti=f"t{i}") for i in range(3)]  # three logins: three different JWTs
    assert len(set(pat)) == 3
    assert _writes(strict_client, *(f"Bearer {t}" for t in pat)) == [201, 201, 429]
    assert _writes(strict_client, f"Bearer {issuer.token('kim')}") == [201]


def test_a_write_checks_its_oidc_token_once(client: TestClient, issuer: LocalIssuer) -> None:
    """The write rate limit verifies the token to count it per person; the auth dependency reuses
    that identity instead of checking the signature again."""
    verifier = client.app.state.oidc  # type: ignore[attr-defined]
    checks: list[str] = []
    verify = verifier.verify

    def counted(token: str) -> Any:
        checks.append(token)
        return verify(token)

    verifier.verify = counted
    token = issuer.token("pat")
    assert _writes(client, f"Bearer {token}") == [201]
    assert checks == [token]
    assert client.get("/api/v1/users", headers=bearer(token)).status_code == 200  # a read: checked once
    assert checks == [token, token]


def test_made_up_credentials_share_the_address_bucket(strict_client: TestClient, issuer: LocalIssuer) -> None:
    forged = LocalIssuer()  # the same issuer name, another key: the signature does not verify
    made_up = [f"Bearer {forged.token('pat')}", "Bearer not-a-token", f"Bearer {forged.token('kim')}"]
    assert _writes(strict_client, *made_up) == [401, 401, 429]
    assert _writes(strict_client, f"Bearer {issuer.token('pat')}") == [201]  # pat is not throttled


# --- self-service ------------------------------------------------------------------------------


def _user(client: TestClient, admin: dict[str, str], sessions: sessionmaker[Session], **fields: Any) -> None:
    source, external_id = fields.pop("source"), fields.pop("external_id")
    created = client.post("/api/v1/users", json=fields, headers=admin)
    assert created.status_code == 201, created.text
    with sessions.begin() as session:
        session.execute(
            update(User)
            .where(User.username == fields["username"])
            .values(source=source, external_id=external_id)
        )


def test_me_is_the_keycloak_account_of_the_subject_only(
    client: TestClient, issuer: LocalIssuer, admin: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    # A SCIM connection's user whose externalId is the same string as a Keycloak subject, created
    # first: it must not be the account of whoever holds a token with that subject.
    _user(client, admin, sessions, username="okta_sam", source="scim:okta", external_id="kc-sam")
    _user(client, admin, sessions, username="sam", source="keycloak", external_id="kc-sam")
    _user(client, admin, sessions, username="api_uma", source="api", external_id="kc-uma")
    sam = bearer(issuer.token("kc-sam"))
    me = client.get("/api/v1/me", headers=sam)
    assert me.status_code == 200 and me.json()["username"] == "sam"
    key = ed25519_key("sam-laptop")
    assert client.post("/api/v1/me/ssh-keys", json={"key": key}, headers=sam).status_code == 201
    with sessions() as session:
        okta_sam = session.query(User).filter_by(username="okta_sam").one()
        assert okta_sam.ssh_keys == []

    uma = client.get("/api/v1/me", headers=bearer(issuer.token("kc-uma")))
    assert uma.status_code == 404, uma.text  # only an account of another source has that id


def test_a_key_that_is_someone_elses_is_refused_without_naming_them(
    client: TestClient, issuer: LocalIssuer, admin: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    key = ed25519_key("shared")
    _user(
        client, admin, sessions, username="secret_owner", ssh_public_keys=[key], source="api", external_id="x"
    )
    _user(client, admin, sessions, username="sam", source="keycloak", external_id="kc-sam")
    answer = client.post("/api/v1/me/ssh-keys", json={"key": key}, headers=bearer(issuer.token("kc-sam")))
    assert answer.status_code == 409, answer.text
    assert "secret_owner" not in answer.text and "another account" in answer.json()["detail"]


def test_a_key_that_takes_a_person_over_the_byte_cap_is_refused_and_nothing_changes(
    client: TestClient, issuer: LocalIssuer, admin: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    # The administrator's 31 keys with long comments leave less than a key's room under the
    # per-person cap (accounts.max_ssh_key_bytes, 32 KiB): the person's own key is refused.
    given = [ed25519_key(f"{i:03d}" + "c" * 947) for i in range(31)]
    _user(
        client,
        admin,
        sessions,
        username="sam",
        ssh_public_keys=given,
        source="keycloak",
        external_id="kc-sam",
    )
    sam = bearer(issuer.token("kc-sam"))
    answer = client.post("/api/v1/me/ssh-keys", json={"key": ed25519_key("x" * 900)}, headers=sam)
    assert answer.status_code == 422, answer.text
    assert "accounts.max_ssh_key_bytes" in answer.text and "nothing was changed" in answer.text
    assert len(client.get("/api/v1/me/ssh-keys", headers=sam).json()) == 31
    hidden = client.post("/api/v1/me/ssh-keys", json={"key": ed25519_key("sam\u202elaptop")}, headers=sam)
    assert hidden.status_code == 422 and "U+202E" in hidden.text, hidden.text


# --- oidc.accounts: SCIM connections' people -----------------------------------------------------


@pytest.fixture
def okta_client(settings: Settings, engine: Engine, issuer: LocalIssuer) -> Iterator[TestClient]:
    """Self-service reaches the Keycloak pull's users by `sub` and the `okta` SCIM connection's by `uid`."""
    oidc = issuer.settings(accounts={"keycloak": "sub", "scim:okta": "uid"})
    with _client(settings, engine, issuer, oidc=oidc) as client:
        yield client


def test_a_scim_connections_person_is_reached_only_when_oidc_accounts_names_it(
    client: TestClient,
    okta_client: TestClient,
    issuer: LocalIssuer,
    admin: dict[str, str],
    sessions: sessionmaker[Session],
) -> None:
    _user(client, admin, sessions, username="kim", source="scim:okta", external_id="00u-kim")
    _user(client, admin, sessions, username="kim_entra", source="scim:entra", external_id="00u-kim")
    kim = bearer(issuer.token("okta-sub-kim", uid="00u-kim"))
    assert client.get("/api/v1/me", headers=kim).status_code == 404  # the default: keycloak by sub
    me = okta_client.get("/api/v1/me", headers=kim)
    assert me.status_code == 200 and me.json()["username"] == "kim", me.text
    key = ed25519_key("kim-laptop")
    assert okta_client.post("/api/v1/me/ssh-keys", json={"key": key}, headers=kim).status_code == 201
    with sessions() as session:
        assert [k.origin for k in session.query(User).filter_by(username="kim").one().ssh_keys] == ["self"]
        assert session.query(User).filter_by(username="kim_entra").one().ssh_keys == []


def test_two_accounts_for_one_token_is_a_409_naming_neither(
    okta_client: TestClient,
    issuer: LocalIssuer,
    admin: dict[str, str],
    sessions: sessionmaker[Session],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _user(okta_client, admin, sessions, username="sam_kc", source="keycloak", external_id="kc-sam")
    _user(okta_client, admin, sessions, username="sam_okta", source="scim:okta", external_id="00u-sam")
    token = issuer.token("kc-sam", uid="00u-sam")
    with caplog.at_level(logging.WARNING, logger="sup.me.accounts"):
        answer = okta_client.get("/api/v1/me", headers=bearer(token))
    assert answer.status_code == 409, answer.text
    detail = answer.json()["detail"]
    assert "keycloak, scim:okta" in detail and "will not choose" in detail
    for secret in ("sam_kc", "sam_okta", "kc-sam", "00u-sam", token):
        assert secret not in answer.text
    # The operators learn which accounts collide, never the token or the claims' values.
    logged = caplog.text
    assert "sam_kc of keycloak by claim sub" in logged and "sam_okta of scim:okta by claim uid" in logged
    assert token not in logged and "00u-sam" not in logged and "kc-sam" not in logged
    key = ed25519_key("sam-laptop")
    refused = okta_client.post("/api/v1/me/ssh-keys", json={"key": key}, headers=bearer(token))
    assert refused.status_code == 409
    with sessions() as session:
        assert all(u.ssh_keys == [] for u in session.query(User).filter(User.username.like("sam_%")))
    # Each alone is fine: a token that names only one of them reaches it.
    alone = okta_client.get("/api/v1/me", headers=bearer(issuer.token("kc-sam")))
    assert alone.status_code == 200 and alone.json()["username"] == "sam_kc"


@pytest.mark.parametrize("uid", [None, "", 7, ["00u-pat"]])
def test_no_usable_claim_is_a_404_never_a_match_by_username_or_email(
    okta_client: TestClient,
    issuer: LocalIssuer,
    admin: dict[str, str],
    sessions: sessionmaker[Session],
    uid: Any,
) -> None:
    # pat of the okta connection has no external id; pat2's is "00u-pat". A token without a usable
    # uid but with pat's username and email reaches neither.
    _user(
        okta_client,
        admin,
        sessions,
        username="pat",
        email="pat@example.org",
        source="scim:okta",
        external_id=None,
    )
    _user(okta_client, admin, sessions, username="pat2", source="scim:okta", external_id="00u-pat")
    token = issuer.token("someone", uid=uid, preferred_username="pat", email="pat@example.org")
    answer = okta_client.get("/api/v1/me", headers=bearer(token))
    assert answer.status_code == 404, answer.text
