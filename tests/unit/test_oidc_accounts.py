"""oidc.accounts: which sources' accounts a self-service token may reach, by which claim. Sources are
`keycloak` or `scim:NAME`, claims name the person by an id nobody can edit; a wrong setting stops
SUP at startup with the reason. And which (source, external_id) pairs a token's claims name."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from pydantic import ValidationError

from sup.cli.common import settings_or_exit
from sup.config import OidcSettings
from sup.config.api import KEYCLOAK_SOURCE, SCIM_SOURCE_PREFIX
from sup.me.accounts import AccountKey, account_keys
from sup.scim.storage import connection_source
from sup.sources.keycloak import naming as keycloak_naming

ISSUER = "https://sso.example.org/realms/research"


def _oidc(accounts: Any) -> OidcSettings:
    return OidcSettings(issuer=ISSUER, audience="sup", accounts=accounts)


def test_the_source_names_are_those_the_sources_stamp() -> None:
    assert keycloak_naming.SOURCE == KEYCLOAK_SOURCE
    assert connection_source("okta") == f"{SCIM_SOURCE_PREFIX}okta"


def test_by_default_only_the_keycloak_pulls_users_by_sub() -> None:
    assert OidcSettings(issuer=ISSUER, audience="sup").accounts == {"keycloak": "sub"}


@pytest.mark.parametrize(
    "accounts",
    [
        {"keycloak": "sub", "scim:okta": "uid"},
        {"scim:entra": "oid"},
        {"scim:my-idp.2_b": "https://idp.example.org/claims/person-id"},
        {},
    ],
)
def test_keycloak_and_scim_connections_with_an_id_claim_are_accepted(accounts: dict[str, str]) -> None:
    assert _oidc(accounts).accounts == accounts


@pytest.mark.parametrize(
    "source",
    [
        "api",
        "import",
        "scim:",
        "scim:*",
        "scim:Okta",
        "scim:okta\n",
        "scim: okta",
        "keycloak ",
        "Keycloak",
        "",
    ],
)
def test_a_source_other_than_keycloak_or_a_scim_connection_is_refused(source: str) -> None:
    with pytest.raises(ValidationError, match="must be 'keycloak' or scim:NAME") as info:
        _oidc({source: "sub"})
    (error,) = info.value.errors()
    assert error["loc"] == ("accounts",)


@pytest.mark.parametrize(
    ("claim", "reason"),
    [
        ("", "the claim name is empty"),
        (" sub", "printable characters without spaces"),
        ("su b", "printable characters without spaces"),
        ("sub\n", "printable characters without spaces"),
        ("x" * 257, "printable characters without spaces"),
        ("email", "profile claim"),
        ("preferred_username", "profile claim"),
        ("upn", "profile claim"),
        ("name", "profile claim"),
        ("iss", "not the person"),
        ("azp", "not the person"),
        ("tid", "not the person"),
        ("jti", "not the person"),
    ],
)
def test_a_claim_that_does_not_name_the_person_for_good_is_refused(claim: str, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        _oidc({"scim:okta": claim})


def test_every_problem_is_named_at_once() -> None:
    with pytest.raises(ValidationError) as info:
        _oidc({"api": "sub", "scim:okta": "email", "keycloak": "sub"})
    message = str(info.value)
    assert "source 'api'" in message and "source 'scim:okta': 'email'" in message
    assert "source 'keycloak'" not in message


def test_the_environment_sets_it_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUP_OIDC__ISSUER", ISSUER)
    monkeypatch.setenv("SUP_OIDC__AUDIENCE", "sup")
    monkeypatch.setenv("SUP_OIDC__ACCOUNTS", '{"keycloak": "sub", "scim:okta": "uid"}')
    settings = settings_or_exit()
    assert settings.oidc is not None and settings.oidc.accounts == {"keycloak": "sub", "scim:okta": "uid"}


def test_a_wrong_setting_stops_sup_at_startup_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SUP_OIDC__ISSUER", ISSUER)
    monkeypatch.setenv("SUP_OIDC__AUDIENCE", "sup")
    monkeypatch.setenv("SUP_OIDC__ACCOUNTS", '{"scim:okta": "preferred_username"}')
    with pytest.raises(typer.Exit):
        settings_or_exit()
    error = " ".join(capsys.readouterr().err.split())
    assert "invalid settings: oidc.accounts" in error and "'preferred_username' is a profile claim" in error


# --- which accounts a token names ---------------------------------------------------------------

ACCOUNTS = {"keycloak": "sub", "scim:okta": "uid", "scim:entra": "oid"}


def test_each_configured_claim_a_token_holds_names_one_source_in_the_settings_order() -> None:
    claims = {"sub": "kc-1", "oid": "e-1", "uid": "00u1", "preferred_username": "pat", "email": "p@x"}
    assert account_keys(ACCOUNTS, claims) == [
        AccountKey("keycloak", "kc-1", "sub"),
        AccountKey("scim:okta", "00u1", "uid"),
        AccountKey("scim:entra", "e-1", "oid"),
    ]


@pytest.mark.parametrize("value", [None, "", 42, True, ["00u1"], {"id": "00u1"}])
def test_a_claim_that_is_absent_empty_or_not_a_string_names_nothing(value: Any) -> None:
    claims = {"sub": "kc-1", "uid": value} if value is not None else {"sub": "kc-1"}
    assert account_keys(ACCOUNTS, claims) == [AccountKey("keycloak", "kc-1", "sub")]


def test_username_and_email_claims_name_nothing_unless_configured() -> None:
    assert account_keys({"scim:okta": "uid"}, {"sub": "x", "preferred_username": "pat", "email": "p@x"}) == []
