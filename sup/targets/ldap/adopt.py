"""`sup import --from-ldap` (the spec's adopt hook): the posixAccount entries below `users_dn` with
their uid and gid numbers, names, mail, shell, home and SSH keys; the posixGroup entries below
`groups_dn` with their gid numbers and members. A group named like a user and holding that user's gid
is the user's private group (SUP's default layout); a user whose primary group is shared with others
is reported, since SUP gives every user a private group (`ids.private_groups`). Read with the
target's own `observe`, the same bulk read a reconcile does."""

from __future__ import annotations

from typing import Any

from sup.targets.adoption import Adoption, AdoptionError, AdoptionProblem
from sup.targets.base import ObserveError, TargetError
from sup.targets.ldap import dn as dnlib
from sup.targets.ldap.model import ObservedEntry
from sup.targets.ldap.observe import observe
from sup.targets.ldap.settings import LdapSettings
from sup.targets.ldap.target import LdapTarget
from sup.targets.spec import TargetContext


def _first(entry: ObservedEntry, attribute: str) -> str | None:
    values = entry.get(attribute)
    return values[0] if values else None


def adopt(context: TargetContext[LdapSettings], adoption: Adoption) -> None:
    target = LdapTarget(context)
    try:
        observed = observe(target.connection, target.layout)  # in full, never hollow
    except (ObserveError, TargetError) as exc:
        raise AdoptionError(f"cannot read ldap: {exc}") from exc
    finally:
        target.close()
    layout = target.layout
    users_dn, groups_dn = dnlib.normalize(layout.users_dn), dnlib.normalize(layout.groups_dn)
    users: dict[str, dict[str, Any]] = {}
    by_dn: dict[str, str] = {}
    groups: list[tuple[str, ObservedEntry]] = []
    for ndn, entry in sorted(observed.entries.items()):
        if dnlib.parent_of(ndn) == users_dn and "posixaccount" in entry.classes:
            name = _first(entry, "uid") or ""
            cn, sn = _first(entry, "cn"), _first(entry, "sn")
            users[name] = {
                "username": name,
                "uid_number": int(_first(entry, "uidNumber") or 0),
                "primary_gid": int(_first(entry, "gidNumber") or 0),
                "display_name": cn if cn and cn != name else None,
                "given_name": _first(entry, "givenName"),
                "family_name": sn if sn and sn != name else None,
                "email": _first(entry, "mail"),
                "login_shell": _first(entry, "loginShell"),
                "home_directory": _first(entry, "homeDirectory"),
                "ssh_public_keys": sorted(entry.get("sshPublicKey")),
                "groups": [],
            }
            by_dn[ndn] = name
        elif dnlib.parent_of(ndn) == groups_dn and "posixgroup" in entry.classes:
            groups.append((ndn, entry))
    gid_owner: dict[int, str] = {}
    for _ndn, entry in groups:
        name = _first(entry, "cn") or ""
        gid = int(_first(entry, "gidNumber") or 0)
        gid_owner[gid] = name
        members = sorted(
            by_dn.get(dnlib.normalize(v), "") if layout.bis else v for v in entry.get(layout.member_attribute)
        )
        members = [m for m in members if m]
        user = users.get(name)
        if user is not None and user["primary_gid"] == gid and not members:
            continue  # the user's private group
        adoption.groups.append(
            {"name": name, "gid_number": gid, "description": _first(entry, "description"), "members": members}
        )
    for name, user in users.items():
        owner = gid_owner.get(user["primary_gid"])
        if adoption.private_groups and owner != name:
            said = f"group {owner!r}" if owner else "no group in LDAP"
            adoption.problems.append(
                AdoptionProblem(
                    f"ldap {layout.user_dn(name)}",
                    f"primary gid {user['primary_gid']} is {said}, not a private group {name!r}; "
                    "SUP gives each user a private group (ids.private_groups)",
                    field="gidNumber",
                    kind="user",
                    name=name,
                )
            )
        user.pop("groups")
        adoption.users.append({k: v for k, v in user.items() if v is not None})
