"""Settings: SUP_* environment (nested with __), SUP_CONFIG YAML, validation, secrets kept hidden."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from sup.config import Settings, load_settings

LDAP_ENV = {
    "SUP_LDAP__URL": "ldap://127.0.0.1:3890",
    "SUP_LDAP__BIND_DN": "cn=sup,dc=example,dc=org",
    "SUP_LDAP__BIND_PASSWORD": "s3cret-bind-pw",
    "SUP_LDAP__BASE_DN": "dc=example,dc=org",
}


def test_defaults_disable_every_target() -> None:
    settings = load_settings()
    assert settings.database_url == "sqlite:///sup.db"
    assert [t for t in ("ldap", "slurm", "kube") if settings.target_enabled(t)] == []
    assert settings.keycloak is None


def test_environment_nested_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in LDAP_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SUP_LDAP__SCHEMA", "rfc2307")
    monkeypatch.setenv("SUP_SLURM__CLUSTER", "gpu")
    monkeypatch.setenv("SUP_RECONCILE__INTERVAL_SECONDS", "60")
    settings = load_settings()
    assert settings.ldap is not None and settings.ldap.schema_ == "rfc2307"
    assert settings.ldap.bind_password.get_secret_value() == "s3cret-bind-pw"
    assert settings.slurm is not None and settings.slurm.sacctmgr == "sacctmgr"
    assert settings.reconcile.interval_seconds == 60
    assert settings.target_enabled("ldap") and settings.target_enabled("slurm")
    assert not settings.target_enabled("kube")


def test_secrets_never_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in LDAP_ENV.items():
        monkeypatch.setenv(key, value)
    settings = load_settings()
    assert "s3cret-bind-pw" not in repr(settings)
    assert "s3cret-bind-pw" not in str(settings.model_dump())


def test_incomplete_target_section_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUP_LDAP__URL", "ldap://x")
    with pytest.raises(ValidationError) as info:
        load_settings()
    missing = {e["loc"] for e in info.value.errors()}
    assert ("ldap", "bind_dn") in missing and ("ldap", "base_dn") in missing


def test_yaml_file_and_environment_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "sup.yaml"
    config.write_text(
        "database_url: postgresql://sup@db/sup\n"
        "ids:\n  uid_range: {min: 20000, max: 29999}\n"
        "kube:\n  namespace: research\n"
        "naming:\n  strategy: full\n"
    )
    monkeypatch.setenv("SUP_CONFIG", str(config))
    monkeypatch.setenv("SUP_DATABASE_URL", "sqlite:///other.db")
    settings = load_settings()
    assert settings.database_url == "sqlite:///other.db"  # the environment wins
    assert settings.ids.uid_range.min == 20000
    assert settings.kube is not None and settings.kube.namespace == "research"
    assert settings.naming.strategy == "full"


def test_missing_config_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SUP_CONFIG", str(tmp_path / "nope.yaml"))
    with pytest.raises(FileNotFoundError, match=r"nope\.yaml"):
        load_settings()


def test_unknown_key_in_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "sup.yaml"
    config.write_text("ids:\n  uid_rnage: {min: 1, max: 2}\n")
    monkeypatch.setenv("SUP_CONFIG", str(config))
    with pytest.raises(ValidationError, match="uid_rnage"):
        load_settings()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"ids": {"uid_range": {"min": 5000, "max": 100}}}, "min > max"),
        ({"ids": {"uid_range": {"min": 50000, "max": 60000}}}, "overlaps gid_range"),
        ({"accounts": {"home_template": "home/{username}"}}, "absolute path"),
        ({"accounts": {"default_shell": "/bin/ksh"}}, "allowed_shells"),
    ],
)
def test_policy_validation(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Settings(**overrides)


def test_overlap_allowed_when_private_gids_are_allocated() -> None:
    settings = Settings(ids={"uid_range": {"min": 50000, "max": 60000}, "private_gid": "allocate"})
    assert settings.ids.uid_range.max == 60000
