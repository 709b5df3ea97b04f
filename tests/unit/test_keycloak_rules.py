"""The Keycloak source's and the OIDC verifier's pure rules: settings, names, precedence, roles, and
when the puller in `sup serve` pulls."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sup.api.oidc import OidcVerifier, looks_like_jwt
from sup.config import OidcSettings, Settings, SourcePolicy
from sup.domain.roles import Role
from sup.sources.keycloak import scheduler
from sup.sources.keycloak.naming import group_name_of
from sup.sources.keycloak.reader import KcGroup, in_scope

KC = {"url": "https://sso.example.org/", "realm": "hpc", "client_id": "sup", "client_secret": "s3cret"}


def _settings(**keycloak: Any) -> Settings:
    return Settings(keycloak={**KC, **keycloak})


def test_keycloak_settings_normalise_and_refuse() -> None:
    settings = _settings(groups_path="/hpc/")
    assert settings.keycloak is not None
    assert settings.keycloak.url == "https://sso.example.org"
    assert settings.keycloak.groups_path == "/hpc"
    for bad in ({"url": "sso.example.org"}, {"groups_path": "hpc"}, {"group_names": "full"}):
        with pytest.raises(ValidationError) as caught:
            _settings(**bad)
        assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize(
    ("rule", "root", "path", "name"),
    [
        ("name", "/", "/HPC/GPU Users", "gpu_users"),
        ("path", "/", "/HPC/GPU Users", "hpc-gpu_users"),
        ("path", "/hpc", "/hpc/gpu", "gpu"),
        ("path", "/hpc", "/hpc/gpu/a100", "gpu-a100"),
    ],
)
def test_group_names_from_paths(rule: str, root: str, path: str, name: str) -> None:
    settings = _settings(group_names=rule, groups_path=root)
    assert group_name_of(settings, KcGroup(id="1", name=path.rsplit("/", 1)[1], path=path)) == name


def test_long_group_names_are_hashed_not_cut() -> None:
    settings = _settings(group_names="path")
    one = group_name_of(settings, KcGroup(id="1", name="b", path="/" + "x" * 40 + "/a"))
    two = group_name_of(settings, KcGroup(id="2", name="b", path="/" + "x" * 40 + "/b"))
    assert len(one) == 32 and one.startswith("x" * 23) and one != two


def test_group_scope() -> None:
    assert in_scope("/hpc", "/") and in_scope("/hpc/gpu", "/hpc") and in_scope("/hpc", "/hpc")
    assert not in_scope("/hpcx", "/hpc") and not in_scope("/other", "/hpc")


def test_precedence() -> None:
    policy = SourcePolicy(precedence=["keycloak", "scim:*", "api"])
    assert policy.may_take_over("keycloak", "api")
    assert policy.may_take_over("keycloak", "scim:okta")
    assert policy.may_take_over("keycloak", "import")  # not listed: weakest
    assert not policy.may_take_over("api", "keycloak")
    assert not policy.may_take_over("import", "api")  # an unlisted source never takes over
    assert SourcePolicy().may_take_over("keycloak", "keycloak")
    assert not SourcePolicy().may_take_over("keycloak", "api")


def test_oidc_roles_and_token_shapes() -> None:
    realm = OidcVerifier(OidcSettings(issuer="https://i", audience="sup"))
    claims = {"realm_access": {"roles": ["offline_access", "sup-viewer", "sup-operator"]}}
    assert realm.role_of(claims) == Role.operator
    assert realm.role_of({"realm_access": {"roles": ["other"]}}) is None
    assert realm.role_of({}) is None
    client = OidcVerifier(
        OidcSettings(issuer="https://i", audience="sup", role_client="sup", roles={"boss": "admin"})
    )
    assert client.role_of({"resource_access": {"sup": {"roles": ["boss"]}}}) == Role.admin
    assert client.role_of({"realm_access": {"roles": ["boss"]}}) is None
    assert looks_like_jwt("a.b.c") and not looks_like_jwt("sup_abc") and not looks_like_jwt("a.b")


def test_the_puller_runs_only_on_the_leader(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(scheduler, "full_sync", lambda *a, **k: calls.append("full"))
    monkeypatch.setattr(scheduler, "events_sync", lambda *a, **k: calls.append("events"))
    leading = [False]
    settings = _settings(interval_seconds=100, events_seconds=10)
    no_engine: Any = None  # the sync functions are replaced: no store is touched
    puller = scheduler.KeycloakPuller(settings, engine=no_engine, is_leader=lambda: leading[0])
    assert puller.tick(0) is None and calls == []
    leading[0] = True
    assert puller.tick(1) == "full"  # the new leader starts with a full pull
    assert puller.tick(5) is None
    assert puller.tick(12) == "events"
    assert puller.tick(101) == "full"
    leading[0] = False
    assert puller.tick(102) is None
    leading[0] = True
    assert puller.tick(103) == "full"  # lead regained: a full pull again
    assert calls == ["full", "events", "full", "full"]
    off = scheduler.KeycloakPuller(_settings(admin_events=False), engine=no_engine, is_leader=lambda: True)
    calls.clear()
    assert off.tick(0) == "full" and off.tick(500) is None and calls == ["full"]
