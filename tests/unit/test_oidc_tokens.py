"""OIDC bearer tokens (sup/api/oidc.py) against a local issuer: when a token is valid (nbf, exp with
the leeway), that it is an access token (typ), role claims of the wrong shape, and https-only keys."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pydantic import ValidationError

from sup.api.oidc import InvalidToken, OidcVerifier
from sup.config import OidcSettings
from sup.domain.roles import Role
from tests.support.oidc_issuer import LocalIssuer


@pytest.fixture
def issuer() -> LocalIssuer:
    return LocalIssuer()


def _refusal(verifier: OidcVerifier, token: str) -> str:
    with pytest.raises(InvalidToken) as refused:
        verifier.verify(token)
    assert token not in str(refused.value)
    return str(refused.value)


def test_a_keycloak_access_token_is_accepted(issuer: LocalIssuer) -> None:
    identity = issuer.verifier().verify(issuer.token("abc"))
    assert (identity.subject, identity.username, identity.role) == ("abc", "pat", Role.admin)


def test_a_token_not_valid_yet_is_refused(issuer: LocalIssuer) -> None:
    verifier, now = issuer.verifier(leeway_seconds=30), int(time.time())
    reason = _refusal(verifier, issuer.token(nbf=now + 3600))
    assert "not valid yet" in reason
    assert "not valid yet" in _refusal(verifier, issuer.token(nbf=now + 60))
    assert verifier.verify(issuer.token(nbf=now + 10)).subject  # within the leeway (clock skew)
    assert verifier.verify(issuer.token(nbf=now - 10)).subject
    assert _refusal(verifier, issuer.token(nbf="soon"))  # not a NumericDate


def test_the_leeway_applies_to_exp_as_configured(issuer: LocalIssuer) -> None:
    expired_90s_ago = issuer.token(exp=int(time.time()) - 90)
    assert issuer.verifier(leeway_seconds=120).verify(expired_90s_ago).subject
    assert "expired" in _refusal(issuer.verifier(leeway_seconds=30), expired_90s_ago)


def test_only_access_tokens_are_taken(issuer: LocalIssuer) -> None:
    verifier = issuer.verifier()
    reason = _refusal(verifier, issuer.token(typ="ID"))
    assert "ID token" in reason and "access token" in reason
    assert "not an access token" in _refusal(verifier, issuer.token(typ="Refresh"))
    # RFC 9068 access tokens say so in the header; a token that declares nothing is judged by aud.
    assert verifier.verify(issuer.token(header={"typ": "at+jwt"}, typ=None)).subject
    assert verifier.verify(issuer.token(header={"typ": "application/at+JWT"}, typ=None)).subject
    assert verifier.verify(issuer.token(header={"typ": None}, typ=None)).subject
    assert "ID token" in _refusal(verifier, issuer.token(header={"typ": "at+jwt"}, typ="ID"))
    assert "header typ" in _refusal(verifier, issuer.token(header={"typ": "logout+jwt"}))


@pytest.mark.parametrize(
    ("claims", "settings", "blamed"),
    [
        ({"realm_access": ["sup-admin"]}, {}, "realm_access"),
        ({"realm_access": "sup-admin"}, {}, "realm_access"),
        ({"realm_access": {"roles": "sup-admin"}}, {}, "realm_access.roles"),
        ({"resource_access": ["sup"]}, {"role_client": "sup"}, "resource_access"),
        ({"resource_access": {"sup": ["boss"]}}, {"role_client": "sup"}, "resource_access.sup"),
        ({"resource_access": {"sup": {"roles": 7}}}, {"role_client": "sup"}, "resource_access.sup.roles"),
    ],
)
def test_role_claims_of_the_wrong_shape_make_the_token_invalid(
    issuer: LocalIssuer, claims: dict[str, Any], settings: dict[str, Any], blamed: str
) -> None:
    reason = _refusal(issuer.verifier(**settings), issuer.token(**claims))
    assert f"token's {blamed} claim" in reason


def test_absent_role_claims_grant_no_role(issuer: LocalIssuer) -> None:
    assert issuer.verifier().verify(issuer.token(realm_access=None)).role is None
    assert issuer.verifier().verify(issuer.token(realm_access={})).role is None
    client = issuer.verifier(role_client="sup", roles={"boss": "operator"})
    assert client.verify(issuer.token(resource_access={"other": {"roles": ["boss"]}})).role is None
    assert client.verify(issuer.token(resource_access={"sup": {"roles": ["boss"]}})).role == Role.operator


def test_a_username_claim_that_is_not_a_string_falls_back_to_the_subject(issuer: LocalIssuer) -> None:
    assert issuer.verifier().verify(issuer.token("s-1", preferred_username={"x": 1})).username == "s-1"


def test_keys_are_read_over_https_only_unless_allowed() -> None:
    with pytest.raises(ValidationError) as refused:
        OidcSettings(issuer="http://127.0.0.1:8080/realms/hpc", audience="sup")
    assert "oidc.issuer" in str(refused.value) and "oidc.allow_insecure_http" in str(refused.value)
    with pytest.raises(ValidationError) as refused:
        OidcSettings(issuer="https://i", audience="sup", jwks_url="http://i/certs")
    assert "oidc.jwks_url" in str(refused.value) and "SUP_OIDC__ALLOW_INSECURE_HTTP" in str(refused.value)
    with pytest.raises(ValidationError, match="not an https URL"):
        OidcSettings(issuer="https://i", audience="sup", jwks_url="file:///etc/keys.json")
    allowed = OidcSettings(issuer="http://127.0.0.1/realms/hpc", audience="sup", allow_insecure_http=True)
    assert allowed.url_problem("http://127.0.0.1/certs") is None

    # An https issuer whose discovery document points at plain-http keys: not read.
    issuer = LocalIssuer(jwks_uri="http://id.example.org/certs")
    assert "keys cannot be read" in _refusal(issuer.verifier(), issuer.token())
    insecure = LocalIssuer("http://127.0.0.1:8080/realms/hpc")
    assert insecure.verifier(allow_insecure_http=True).verify(insecure.token()).subject
