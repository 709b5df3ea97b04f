"""How SUP judges an introspection answer, caches it and bounds what it asks the issuer
(sup/scim/oauth.py). The real Keycloak's endpoint: tests/keycloak/test_scim_oauth.py."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pydantic import ValidationError

from sup.api.oidc import InvalidToken
from sup.config import ScimOAuthConnection, ScimSettings
from sup.scim import oauth
from sup.scim.oauth import IssuerUnavailable, ScimOAuth, TooManyChecks

ISSUER = "https://sso.example.org/realms/research"
NOW = 1_800_000_000.0


def _connection(**extra: Any) -> dict[str, Any]:
    return {
        "issuer": ISSUER,
        "introspection_url": ISSUER + "/protocol/openid-connect/token/introspect",
        "client_id": "sup",
        "client_secret": "s3cret",
        **extra,
    }


def _good(**extra: Any) -> dict[str, Any]:
    return {
        "active": True,
        "iss": ISSUER,
        "aud": ["account", "sup"],
        "exp": NOW + 300,
        "typ": "Bearer",
        **extra,
    }


class Issuer:
    """Answers introspection requests from a table of token -> answer; counts them."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def __call__(self, settings: ScimOAuthConnection, body: bytes) -> Any:
        token = body.decode().split("&")[0].removeprefix("token=")
        self.asked.append(token)
        answer = self.answers.get(token, {"active": False})
        if isinstance(answer, Exception):
            raise answer
        return answer


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def _oauth(
    answers: dict[str, Any], clock: Clock | None = None, **connections: dict[str, Any]
) -> tuple[ScimOAuth, Issuer]:
    issuer = Issuer(answers)
    settings = ScimSettings(oauth=connections or {"kc": _connection()})
    return ScimOAuth(settings, post=issuer, clock=clock or Clock()), issuer


def test_an_active_token_for_sup_is_the_connection_and_is_cached_until_the_bound() -> None:
    clock = Clock()
    checker, issuer = _oauth({"t1": _good()}, clock, kc=_connection(cache_seconds=60))
    assert checker.connection_of("t1", "10.0.0.1") == "kc"
    clock.now += 59
    assert checker.connection_of("t1", "10.0.0.1") == "kc"
    assert issuer.asked == ["t1"]
    clock.now += 2  # past cache_seconds: asked again
    assert checker.connection_of("t1", "10.0.0.1") == "kc"
    assert issuer.asked == ["t1", "t1"]


def test_the_cache_never_outlives_the_tokens_exp() -> None:
    clock = Clock()
    checker, issuer = _oauth({"t1": _good(exp=NOW + 10)}, clock, kc=_connection(cache_seconds=600))
    assert checker.connection_of("t1", "a") == "kc"
    clock.now += 11
    issuer.answers["t1"] = {"active": False}
    with pytest.raises(InvalidToken, match="not active"):
        checker.connection_of("t1", "a")


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"active": False}, "not active"),
        ({**_good(), "active": "true"}, "not active"),  # a string is not true
        (_good(iss=ISSUER + "x"), "wrong iss"),
        (_good(aud="account"), "wrong aud"),
        ({k: v for k, v in _good().items() if k != "aud"}, "wrong aud"),
        ({k: v for k, v in _good().items() if k != "exp"}, "no expiry"),
        (_good(exp=NOW - 60), "expired"),
        (_good(nbf=NOW + 120), "not valid yet"),
        (_good(typ="ID"), "ID token"),
        (_good(typ="Refresh"), "not an access token"),
    ],
)
def test_answers_that_do_not_vouch_for_a_token_for_sup_are_401(answer: dict[str, Any], reason: str) -> None:
    checker, _ = _oauth({"t": answer})
    with pytest.raises(InvalidToken, match=reason):
        checker.connection_of("t", "a")


def test_the_audience_is_the_client_id_unless_set_and_may_be_a_string() -> None:
    checker, _ = _oauth({"t": _good(aud="sup")})
    assert checker.connection_of("t", "a") == "kc"
    checker, _ = _oauth({"t": _good(aud="scim-api")}, kc=_connection(audience="scim-api"))
    assert checker.connection_of("t", "a") == "kc"


def test_a_refused_token_is_not_asked_about_again_for_a_while() -> None:
    clock = Clock()
    checker, issuer = _oauth({}, clock)
    for _ in range(3):
        with pytest.raises(InvalidToken):
            checker.connection_of("revoked", "a")
    assert issuer.asked == ["revoked"]
    clock.now += oauth.REFUSED_SECONDS + 1
    with pytest.raises(InvalidToken):
        checker.connection_of("revoked", "a")
    assert issuer.asked == ["revoked", "revoked"]


def test_an_issuer_that_cannot_answer_is_unavailable_not_a_refusal() -> None:
    checker, issuer = _oauth({"down": OSError("connection refused"), "odd": ["not", "an", "object"]})
    with pytest.raises(IssuerUnavailable):
        checker.connection_of("down", "a")
    with pytest.raises(IssuerUnavailable):
        checker.connection_of("odd", "a")
    issuer.answers["down"] = _good()
    assert checker.connection_of("down", "a") == "kc"  # not remembered as refused


def test_new_tokens_from_one_address_are_checked_at_a_bounded_rate() -> None:
    checker, issuer = _oauth({})
    burst = oauth.UNCACHED_PER_ADDRESS.burst
    for n in range(burst):
        with pytest.raises(InvalidToken):
            checker.connection_of(f"made-up-{n}", "192.0.2.7")
    with pytest.raises(TooManyChecks):
        checker.connection_of("made-up-more", "192.0.2.7")
    assert len(issuer.asked) == burst
    issuer.answers["good"] = _good()
    assert checker.connection_of("good", "198.51.100.1") == "kc"  # another address is not starved


def test_an_opaque_token_is_tried_at_each_introspecting_connection() -> None:
    other = "https://idp.example.com"
    checker, issuer = _oauth(
        {"t": _good(iss=other, aud="sup-okta")},
        kc=_connection(),
        okta=_connection(issuer=other, introspection_url=other + "/introspect", client_id="sup-okta"),
    )
    assert checker.connection_of("t", "a") == "okta"
    assert issuer.asked == ["t", "t"]


def _unsigned_jwt(claims: dict[str, Any]) -> str:
    def encode(part: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=")

    return f"{encode({'alg': 'RS256'})}.{encode(claims)}.c2ln"


def test_a_jwt_goes_only_to_the_connections_of_its_issuer() -> None:
    jwt = _unsigned_jwt
    checker, issuer = _oauth({})
    with pytest.raises(InvalidToken, match="issuer"):
        checker.connection_of(jwt({"iss": "https://elsewhere.example"}), "a")
    assert issuer.asked == []
    token = jwt({"iss": ISSUER})
    issuer.answers[token] = _good()
    assert checker.connection_of(token, "a") == "kc"


@pytest.mark.parametrize(
    ("connection", "message"),
    [
        ({"issuer": ISSUER, "introspection_url": ISSUER + "/i"}, "client_id and client_secret"),
        ({"issuer": ISSUER}, "needs audience"),
        (_connection(introspection_url="http://sso.example.org/i"), "plain http"),
        (_connection(jwks_url=ISSUER + "/certs"), "not both"),
    ],
)
def test_incomplete_or_unsafe_connections_are_refused_at_startup(
    connection: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        ScimSettings(oauth={"kc": connection})


@pytest.mark.parametrize("name", ["Okta", "-x", "a" * 60, "okta corp"])
def test_connection_names_are_token_names_that_fit_the_source_column(name: str) -> None:
    with pytest.raises(ValidationError, match="connection name"):
        ScimSettings(oauth={name: _connection()})


def test_the_client_secret_is_not_shown_by_the_settings() -> None:
    settings = ScimSettings(oauth={"kc": _connection()})
    assert "s3cret" not in repr(settings) and "s3cret" not in settings.model_dump_json()
