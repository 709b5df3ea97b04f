"""The sssd.conf that makes nodes read what the LDAP target writes (`sup sssd-config`).

The template (sup/targets/ldap/templates/sssd.conf.template, or the operator's own) uses `string.Template`
placeholders, filled from the `ldap` settings: URI, schema, the three OUs as search bases, the member
attribute, TLS. `options` then set or add single keys, in the domain section unless they name one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from string import Template

from sup.targets.ldap.layout import Layout
from sup.targets.ldap.settings import LdapSettings

_KEY = re.compile(r"^[a-z_][a-z0-9_]*$")


class SssdConfigError(ValueError):
    """A template or option that cannot make an sssd.conf; the message says which and why."""


def default_template() -> Path:
    """The shipped template, inside the package (a wheel installs it alongside)."""
    return Path(__file__).resolve().parent / "templates" / "sssd.conf.template"


def _single_line(name: str, value: str) -> str:
    if "\n" in value or "\r" in value or "\x00" in value:
        raise SssdConfigError(f"{name} must be one line")
    return value


def render(
    ldap: LdapSettings,
    *,
    domain: str = "sup",
    template: str | None = None,
    bind_dn: str | None = None,
    bind_password: str | None = None,
    options: Sequence[str] = (),
) -> str:
    """The sssd.conf text. `options`: "key=value" (domain section) or "section:key=value"."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", domain):
        raise SssdConfigError(f"domain {domain!r} must be letters, digits, '_', '.' or '-'")
    layout = Layout.from_settings(ldap)
    ca_file = _single_line("ca_file", ldap.ca_file) if ldap.ca_file else None
    bind = "# anonymous bind (set ldap_default_bind_dn and ldap_default_authtok for a read-only DN)"
    if bind_dn:
        bind = f"ldap_default_bind_dn = {_single_line('bind DN', bind_dn)}"
        if bind_password is not None:
            bind += "\nldap_default_authtok_type = password"
            bind += f"\nldap_default_authtok = {_single_line('bind password', bind_password)}"
    values = {
        "domain": domain,
        "uri": ldap.url,
        "schema": ldap.schema_,
        "base_dn": _single_line("base_dn", ldap.base_dn),
        "users_dn": _single_line("users_dn", layout.users_dn),
        "groups_dn": _single_line("groups_dn", layout.groups_dn),
        "sudoers_dn": _single_line("sudoers_dn", layout.sudoers_dn),
        "member_attribute": layout.member_attribute,
        "start_tls": "true" if ldap.start_tls else "false",
        "tls_cacert": f"ldap_tls_cacert = {ca_file}" if ca_file else "# ldap_tls_cacert: the system's CAs",
        "bind": bind,
    }
    text = template if template is not None else default_template().read_text()
    try:
        rendered = Template(text).substitute(values)
    except KeyError as exc:
        known = ", ".join(f"${k}" for k in sorted(values))
        raise SssdConfigError(f"the template uses ${exc.args[0]}, which is not one of {known}") from None
    except ValueError as exc:
        raise SssdConfigError(f"the template is not a valid string.Template: {exc}") from None
    return set_options(rendered, _parse_options(options, default_section=f"domain/{domain}"))


def _parse_options(options: Sequence[str], default_section: str) -> list[tuple[str, str, str]]:
    parsed = []
    for option in options:
        head, equals, value = option.partition("=")
        section, colon, key = head.rpartition(":") if ":" in head else ("", "", head)
        key = key.strip()
        if not equals or not _KEY.fullmatch(key):
            raise SssdConfigError(f"option {option!r} is not KEY=VALUE or SECTION:KEY=VALUE")
        parsed.append((section.strip() if colon else default_section, key, _single_line(key, value.strip())))
    return parsed


def set_options(text: str, options: Sequence[tuple[str, str, str]]) -> str:
    """Set `key = value` in `[section]` of an ini text: replace the key's line, else add it at the end
    of the section, else add the section."""
    lines = text.splitlines()
    for section, key, value in options:
        start = next((i for i, line in enumerate(lines) if line.strip() == f"[{section}]"), None)
        if start is None:
            lines += ["", f"[{section}]", f"{key} = {value}"]
            continue
        end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        for i in range(start + 1, end):
            if re.match(rf"\s*{re.escape(key)}\s*=", lines[i]):
                lines[i] = f"{key} = {value}"
                break
        else:
            insert = end
            while insert > start + 1 and not lines[insert - 1].strip():
                insert -= 1
            lines.insert(insert, f"{key} = {value}")
    return "\n".join(lines) + "\n"
