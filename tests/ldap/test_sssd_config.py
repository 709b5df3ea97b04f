"""Rendering sssd.conf (pure): the template filled from the settings, options set or added, bad input
refused. That sssd really runs on the result is tested in test_sssd.py and test_cli.py."""

from __future__ import annotations

import pytest

from sup.config import Settings
from sup.targets.ldap import LdapSettings
from sup.targets.ldap.sssd_config import SssdConfigError, default_template, render, set_options


def _ldap(**extra: object) -> LdapSettings:
    ldap = Settings(
        ldap={
            "url": "ldaps://ldap.example.org",
            "bind_dn": "cn=sup,dc=example,dc=org",
            "bind_password": "writing-secret",
            "base_dn": "dc=example,dc=org",
            **extra,
        }
    ).ldap
    assert ldap is not None
    return ldap


def _section(text: str, name: str) -> dict[str, str]:
    lines = text.splitlines()
    start = lines.index(f"[{name}]")
    values = {}
    for line in lines[start + 1 :]:
        if line.startswith("["):
            break
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def test_the_default_template_points_sssd_at_sups_ous() -> None:
    text = render(_ldap(ca_file="/etc/ssl/ca.pem", users_dn="ou=staff,dc=example,dc=org"))
    assert _section(text, "sssd") == {
        "config_file_version": "2",
        "services": "nss, pam, ssh, sudo",
        "domains": "sup",
    }
    domain = _section(text, "domain/sup")
    assert domain["ldap_uri"] == "ldaps://ldap.example.org"
    assert domain["ldap_user_search_base"] == "ou=staff,dc=example,dc=org"
    assert domain["ldap_group_search_base"] == "ou=groups,dc=example,dc=org"
    assert domain["ldap_sudo_search_base"] == "ou=SUDOers,dc=example,dc=org"
    assert domain["ldap_schema"] == "rfc2307bis" and domain["ldap_group_member"] == "member"
    assert domain["ldap_tls_cacert"] == "/etc/ssl/ca.pem" and domain["ldap_id_use_start_tls"] == "false"
    assert "ldap_default_bind_dn" not in domain
    assert "writing-secret" not in text and "cn=sup,dc=example,dc=org" not in text
    assert default_template().name == "sssd.conf.template"


def test_options_replace_or_add_keys_and_a_read_only_bind_dn_can_be_given() -> None:
    text = render(
        _ldap(schema="rfc2307"),
        domain="hpc",
        bind_dn="cn=reader,dc=example,dc=org",
        bind_password="read-only",
        options=["enumerate=true", "debug_level = 6", "nss:filter_users=root,slurm", "new:key=value"],
    )
    domain = _section(text, "domain/hpc")
    assert domain["enumerate"] == "true" and domain["debug_level"] == "6"
    assert domain["ldap_group_member"] == "memberUid"
    assert domain["ldap_default_bind_dn"] == "cn=reader,dc=example,dc=org"
    assert domain["ldap_default_authtok"] == "read-only"
    assert _section(text, "nss")["filter_users"] == "root,slurm"
    assert _section(text, "new") == {"key": "value"}
    assert text.count("enumerate") == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"options": ["novalue"]}, "KEY=VALUE"),
        ({"options": ["Bad Key=1"]}, "KEY=VALUE"),
        ({"options": ["debug_level=1\n[sssd]"]}, "one line"),
        ({"domain": "a b"}, "domain"),
        ({"template": "ldap_uri = $url\n"}, "$url"),
        ({"template": "cost = $5\n"}, "valid string.Template"),
        ({"bind_dn": "cn=x\nldap_uri = ldap://evil"}, "one line"),
    ],
)
def test_bad_input_is_refused_with_a_reason(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SssdConfigError, match=message.replace("$", r"\$").replace("[", r"\[")):
        render(_ldap(), **kwargs)  # type: ignore[arg-type]


def test_set_options_keeps_comments_and_order() -> None:
    text = "[a]\n# note\nx = 1\n\n[b]\ny = 2\n"
    assert set_options(text, [("a", "x", "3"), ("a", "z", "4"), ("b", "y", "5")]) == (
        "[a]\n# note\nx = 3\nz = 4\n\n[b]\ny = 5\n"
    )
