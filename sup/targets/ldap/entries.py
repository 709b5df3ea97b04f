"""The entries the directory should hold, derived from the desired state (pure).

One `Wanted` per user, group and sudo role: its DN, object classes, the values of every attribute SUP
owns (an empty tuple means "must be absent") and, for groups, the membership values. Values that
cannot go into the directory are refused here, with a message, before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sup.domain.desired import DesiredGroup, DesiredState, DesiredUser
from sup.domain.posix import InvalidName, check_name
from sup.targets.ldap import dn as dnlib
from sup.targets.ldap.layout import GROUP, USER, USER_CLASSES, Layout
from sup.targets.ldap.model import Refused, Retired, Wanted
from sup.targets.ldap.sudo import sudo_entry

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass
class WantedSet:
    entries: dict[str, Wanted] = field(default_factory=dict)  # normalized DN -> entry
    refused: list[Refused] = field(default_factory=list)
    retired: dict[str, Retired] = field(default_factory=dict)  # normalized DN -> why it must go
    missing_admin_groups: list[str] = field(default_factory=list)


def wanted_entries(desired: DesiredState, layout: Layout) -> WantedSet:
    result = WantedSet()
    retired_users: set[str] = set()
    if layout.deactivated == "delete":
        retired_users = {name for name, user in desired.users.items() if not user.active}
    usable_users: dict[str, str] = {}  # username -> its membership value (DN or uid)
    for name in sorted(desired.users):
        user = desired.users[name]
        if name in retired_users:
            _retire(result, USER, name, name, layout.user_dn(name))
            continue
        entry = _user_entry(user, layout, result)
        if entry is not None:
            result.entries[entry.ndn] = entry
            usable_users[name] = entry.dn if layout.bis else name
    for name in sorted(desired.groups):
        group = desired.groups[name]
        owner = name if group.private and name in desired.users else None
        if owner is not None and owner in retired_users:
            _retire(result, GROUP, name, owner, layout.group_dn(name))
            continue
        entry = _group_entry(group, owner, layout, usable_users, result)
        if entry is not None:
            result.entries[entry.ndn] = entry
    for name in layout.admin_groups:
        group_entry = result.entries.get(dnlib.normalize(layout.group_dn(name)))
        if group_entry is None or name not in desired.groups:
            result.missing_admin_groups.append(name)
            continue
        sudo = sudo_entry(name, layout)
        result.entries[sudo.ndn] = sudo
    return result


def _retire(result: WantedSet, kind: str, name: str, subject: str, dn: str) -> None:
    reason = f"{subject} is deactivated and ldap.deactivated is delete"
    result.retired[dnlib.normalize(dn)] = Retired(kind, name, subject, reason)


def _refuse_name(kind: str, name: str, dn: str, subject: str | None, result: WantedSet) -> bool:
    """Refuse names that are not POSIX names. They cannot reach the store through SUP's API, but
    the target does not rely on that: a name is escaped in DNs and refused here all the same."""
    try:
        check_name(name, kind="username" if kind == USER else "group name")
    except InvalidName as exc:
        result.refused.append(Refused(kind, name, subject, f"{exc}; SUP does not write it to LDAP", dn))
        return True
    return False


def _refuse_values(
    kind: str,
    name: str,
    subject: str | None,
    dn: str,
    attributes: Mapping[str, Iterable[str]],
    result: WantedSet,
) -> bool:
    for attribute, values in attributes.items():
        for value in values:
            if _CONTROL.search(value):
                message = (
                    f"{attribute} of {kind} {name} contains a control character (e.g. NUL or a line break)"
                )
                result.refused.append(Refused(kind, name, subject, message + "; not written", dn))
                return True
    return False


def _one(value: str | None) -> tuple[str, ...]:
    return (value,) if value else ()


def ascii_mail(email: str | None) -> str | None:
    """`mail` is an IA5 (ASCII) string: an internationalized domain is written in its IDNA form;
    an address whose local part is not ASCII has no such form and is left out."""
    if not email:
        return None
    if email.isascii():
        return email
    local, _, domain = email.rpartition("@")
    if not local.isascii():
        return None
    try:
        return f"{local}@{domain.encode('idna').decode()}"
    except UnicodeError:
        return None


def _user_entry(user: DesiredUser, layout: Layout, result: WantedSet) -> Wanted | None:
    name = user.username
    dn = layout.user_dn(name)
    if _refuse_name(USER, name, dn, name, result):
        return None
    cn = user.cn
    attributes: dict[str, tuple[str, ...]] = {
        "uid": (name,),
        "cn": (cn,),
        "sn": (user.family_name or name,),
        "givenName": _one(user.given_name),
        "mail": _one(ascii_mail(user.email)),
        "uidNumber": (str(user.uid_number),),
        "gidNumber": (str(user.gid_number),),
        "homeDirectory": (user.home_directory,),
        "loginShell": (user.login_shell,),
        "gecos": (user.gecos,),
        "sshPublicKey": tuple(sorted(set(user.ssh_public_keys))),
    }
    if _refuse_values(USER, name, name, dn, attributes, result):
        return None
    return Wanted(USER, name, dn, name, USER_CLASSES, attributes)


def _group_entry(
    group: DesiredGroup, owner: str | None, layout: Layout, usable_users: dict[str, str], result: WantedSet
) -> Wanted | None:
    name = group.name
    dn = layout.group_dn(name)
    if _refuse_name(GROUP, name, dn, owner, result):
        return None
    attributes = {
        "cn": (name,),
        "gidNumber": (str(group.gid_number),),
        "description": _one(group.description),
    }
    if _refuse_values(GROUP, name, owner, dn, attributes, result):
        return None
    members = tuple(sorted(usable_users[u] for u in group.members if u in usable_users))
    return Wanted(GROUP, name, dn, owner, layout.group_classes, attributes, members)
