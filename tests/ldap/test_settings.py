"""The `ldap` settings section: defaults, environment parsing, and shapes refused before anything runs."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sup.config import Settings, load_settings
from sup.targets.ldap.layout import Layout

SECRET = "bind-secret-3f9a"
REQUIRED = {"url": "ldap://ldap.example.org", "bind_dn": "cn=sup,dc=example,dc=org", "bind_password": SECRET,
            "base_dn": "dc=example,dc=org"}  # fmt: skip


def _settings(**ldap: Any) -> Settings:
    return Settings(ldap={**REQUIRED, **ldap})


def test_defaults_are_the_conventional_shape_and_the_safe_policies() -> None:
    ldap = _settings().ldap
    assert ldap is not None
    assert ldap.containers() == {
        "users_dn": "ou=people,dc=example,dc=org",
        "groups_dn": "ou=groups,dc=example,dc=org",
        "sudoers_dn": "ou=SUDOers,dc=example,dc=org",
    }
    assert (ldap.schema_, ldap.group_class, ldap.empty_group_member) == (
        "rfc2307bis", "groupOfNames", "cn=empty-membership-placeholder",
    )  # fmt: skip
    assert (ldap.unknown_entries, ldap.deactivated, ldap.admin_groups) == ("delete", "lock", [])
    assert (ldap.start_tls, ldap.ca_file, ldap.page_size, ldap.pipeline_depth) == (False, None, 500, 64)
    shape = Layout.from_settings(ldap)
    assert shape.member_attribute == "member" and shape.placeholder == "cn=empty-membership-placeholder"
    assert Layout.from_settings(_settings(schema="rfc2307").ldap).placeholder is None  # type: ignore[arg-type]


def test_every_new_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in REQUIRED.items():
        monkeypatch.setenv(f"SUP_LDAP__{key.upper()}", value)
    monkeypatch.setenv("SUP_LDAP__SUDOERS_DN", "ou=sudo,ou=hpc,dc=example,dc=org")
    monkeypatch.setenv("SUP_LDAP__ADMIN_GROUPS", '["ops", "hpc-admins"]')
    monkeypatch.setenv("SUP_LDAP__UNKNOWN_ENTRIES", "report")
    monkeypatch.setenv("SUP_LDAP__DEACTIVATED", "delete")
    monkeypatch.setenv("SUP_LDAP__START_TLS", "true")
    monkeypatch.setenv("SUP_LDAP__CA_FILE", "/etc/ssl/site-ca.pem")
    monkeypatch.setenv("SUP_LDAP__EMPTY_GROUP_MEMBER", "")
    ldap = load_settings().ldap
    assert ldap is not None
    assert ldap.containers()["sudoers_dn"] == "ou=sudo,ou=hpc,dc=example,dc=org"
    assert ldap.admin_groups == ["ops", "hpc-admins"] and ldap.unknown_entries == "report"
    assert ldap.deactivated == "delete" and ldap.start_tls and ldap.ca_file == "/etc/ssl/site-ca.pem"
    assert ldap.empty_group_member is None


@pytest.mark.parametrize(
    ("ldap", "message"),
    [
        ({"url": "http://ldap.example.org"}, "ldap://HOST"),
        ({"url": "ldaps://ldap.example.org", "start_tls": True}, "TLS already"),
        ({"base_dn": "dc=example,,dc=org"}, "base_dn is not a distinguished name"),
        ({"users_dn": "ou=people,dc=elsewhere"}, "must lie below base_dn"),
        ({"users_dn": "dc=example,dc=org"}, "must lie below base_dn"),
        ({"groups_dn": "ou=people,dc=example,dc=org"}, "different OUs"),
        ({"sudoers_dn": "ou=sudo,ou=groups,dc=example,dc=org"}, "different OUs"),
        ({"admin_groups": ["Ops Team"]}, "admin group"),
        ({"sudo_options": ["env_keep+=\u00e9"]}, "printable ASCII"),
        ({"sudo_commands": []}, "at least 1"),
        ({"page_size": 0}, "greater than or equal to 1"),
        ({"schema": "ad"}, "rfc2307bis"),
        ({"nonsense": 1}, "Extra inputs are not permitted"),
    ],
)
def test_bad_settings_are_refused_with_the_key_named(ldap: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        _settings(**ldap)
    assert message in str(info.value)
    shown = str(info.value.errors(include_input=False))  # what `sup` prints (sup/cli/common.py)
    assert message in shown and SECRET not in shown
