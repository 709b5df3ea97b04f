"""What a Keycloak user says of the person: the users service's input (`UserInput`).

Email, first and last name, `enabled` and the configured attributes (SSH keys; uidNumber, gidNumber
and loginShell when present) follow Keycloak. SSH keys from Keycloak have origin `idp` and replace only
the user's other `idp` keys; with a private group, gidNumber is that group's gid. A bad attribute is
reported and left out; the rest of the user still syncs.
"""

from __future__ import annotations

from typing import Any

from sup.config import Settings
from sup.domain.sshkeys import InvalidSshKey, parse_ssh_public_key
from sup.sources.keycloak.naming import SOURCE, keycloak_settings
from sup.sources.keycloak.reader import KcUser
from sup.sources.keycloak.report import SyncReport
from sup.users.upsert import UserInput


def user_input(
    settings: Settings, kc: KcUser, username: str, report: SyncReport, who: str, *, create: bool = False
) -> UserInput:
    """`username` is the POSIX name it should have; `who` names the user in reported problems.
    Creating, the Keycloak id becomes the user's external id."""
    fields = wanted(settings, kc, report, who)
    fields["ssh_public_keys"] = list(_keys(settings, kc, report, who).values())
    if create:
        fields = {"external_id": kc.id, **fields}
    return UserInput(
        username=username,
        source=SOURCE,
        fields=fields,
        key_origin="idp",
        keys_of_origin_only=True,
        private_group_gid="first",
    )


def single(kc: KcUser, name: str) -> str | None:
    values = [v for v in kc.attributes.get(name, []) if v.strip()]
    return values[0].strip() if values else None


def _number(kc: KcUser, name: str, report: SyncReport, who: str) -> int | None:
    raw = single(kc, name)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        report.errors.append(f"{who}: attribute {name}={raw!r} is not a number; ignored")
        return None


def _keys(settings: Settings, kc: KcUser, report: SyncReport, who: str) -> dict[str, str]:
    """fingerprint -> line of the user's valid keys (invalid ones are reported and left out)."""
    found: dict[str, str] = {}
    for line in kc.attributes.get(keycloak_settings(settings).ssh_key_attribute, []):
        if not line.strip():
            continue
        try:
            key = parse_ssh_public_key(line)
        except InvalidSshKey as exc:
            report.errors.append(f"{who}: an SSH key in Keycloak is not valid ({exc}); left out")
            continue
        found.setdefault(key.fingerprint, line.strip())
    return found


def display_name(kc: KcUser) -> str | None:
    name = " ".join(p for p in (kc.first_name, kc.last_name) if p)
    return name or None


def wanted(settings: Settings, kc: KcUser, report: SyncReport, who: str) -> dict[str, Any]:
    kcs = keycloak_settings(settings)
    fields: dict[str, Any] = {
        "email": kc.email,
        "given_name": kc.first_name,
        "family_name": kc.last_name,
        "display_name": display_name(kc),
        "active": kc.enabled,
    }
    shell = single(kc, kcs.shell_attribute)
    if shell is not None:
        fields["login_shell"] = shell
    uid = _number(kc, kcs.uid_attribute, report, who)
    if uid is not None:
        fields["uid_number"] = uid
    gid = _number(kc, kcs.gid_attribute, report, who)
    if gid is not None:
        fields["primary_gid"] = gid
    return fields
