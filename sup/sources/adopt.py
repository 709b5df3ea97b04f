"""Adopting an existing cluster: read what LDAP and Slurm accounting already hold into an import
document, so that the store describes the cluster as it is and the first reconcile changes nothing.

- LDAP (`--from-ldap`): the posixAccount entries below `users_dn` with their uid and gid numbers,
  names, mail, shell, home and SSH keys; the posixGroup entries below `groups_dn` with their gid
  numbers and members. A group named like a user and holding that user's gid is the user's private
  group (SUP's default layout); a user whose primary group is shared with others is reported, since
  SUP gives every user a private group (`ids.private_groups`).
- Slurm (`--from-slurm`): the accounts of `slurm.cluster` below root with their parent, texts,
  fairshare, QOS and limits; the users associated with an account become the members of the group
  of the same name (the group LDAP already has, when its members agree), and a user's default
  account is kept. Coordinators are not adopted.

The targets are read with their own `observe`, the same bulk read a reconcile does.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sup.config import Settings
from sup.domain.posix import InvalidName, check_groupname
from sup.sources.document import Document, Problem, Record
from sup.targets.base import ObserveError, TargetError

_FIELDS_FROM_LDAP = frozenset(
    {
        "username",
        "uid_number",
        "primary_gid",
        "display_name",
        "given_name",
        "family_name",
        "email",
        "login_shell",
        "home_directory",
        "ssh_public_keys",
    }
)


class AdoptError(Exception):
    """The source cannot be read (not configured, unreachable, a partial read)."""


def adopt(settings: Settings, *, ldap: bool, slurm: bool) -> Document:
    from sup.sources.document import parse_mapping

    raw: dict[str, list[dict[str, Any]]] = {"users": [], "groups": [], "slurm_accounts": []}
    problems: list[Problem] = []
    if ldap:
        _from_ldap(settings, raw, problems)
    if slurm:
        _from_slurm(settings, raw, problems)
    doc = parse_mapping(raw)
    doc.problems += problems
    # A record sets only what the source knows: keep the rest of an existing user as it is.
    doc.users = [
        Record(r.spec, r.where, r.fields & (_FIELDS_FROM_LDAP | {"slurm_default_account", "groups"}))
        for r in doc.users
    ]
    return doc


def _open(name: str, settings: Settings) -> Any:
    from sup.targets import open_target

    if not settings.target_enabled(name):
        raise AdoptError(f"the {name} target is not configured: nothing to adopt from")
    try:
        return open_target(name, settings)
    except TargetError as exc:
        raise AdoptError(str(exc)) from exc
    except Exception as exc:
        raise AdoptError(f"cannot connect to {name}: {type(exc).__name__}: {exc}") from exc


def _observe(target: Any, name: str) -> Any:
    try:
        return target.observe()
    except (ObserveError, TargetError) as exc:
        raise AdoptError(f"cannot read {name}: {exc}") from exc
    finally:
        target.close()


def _first(entry: Any, attribute: str) -> str | None:
    values = entry.get(attribute)
    return values[0] if values else None


def _from_ldap(settings: Settings, raw: dict[str, list[dict[str, Any]]], problems: list[Problem]) -> None:
    from sup.targets.ldap import dn as dnlib

    target = _open("ldap", settings)
    layout = target.layout
    observed = _observe(target, "ldap")
    users_dn, groups_dn = dnlib.normalize(layout.users_dn), dnlib.normalize(layout.groups_dn)
    users: dict[str, dict[str, Any]] = {}
    by_dn: dict[str, str] = {}
    groups: list[tuple[str, Any]] = []
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
        raw["groups"].append(
            {"name": name, "gid_number": gid, "description": _first(entry, "description"), "members": members}
        )
    for name, user in users.items():
        owner = gid_owner.get(user["primary_gid"])
        if settings.ids.private_groups and owner != name:
            said = f"group {owner!r}" if owner else "no group in LDAP"
            problems.append(
                Problem(
                    f"ldap {layout.user_dn(name)}",
                    f"primary gid {user['primary_gid']} is {said}, not a private group {name!r}; "
                    "SUP gives each user a private group (ids.private_groups)",
                    field="gidNumber",
                    kind="user",
                    name=name,
                )
            )
        user.pop("groups")
        raw["users"].append({k: v for k, v in user.items() if v is not None})


def _from_slurm(settings: Settings, raw: dict[str, list[dict[str, Any]]], problems: list[Problem]) -> None:
    from sup.targets.slurm.model import LIMIT_KEYS, parse_tres

    assert settings.slurm is not None or not settings.target_enabled("slurm")
    target = _open("slurm", settings)
    observed = _observe(target, "slurm")
    cluster_name = settings.slurm.cluster.lower() if settings.slurm else ""
    state = observed.clusters.get(cluster_name)
    if state is None:
        raise AdoptError(f"slurmdbd has no cluster {cluster_name!r}")
    members: dict[str, set[str]] = defaultdict(set)
    partitions: dict[str, set[str]] = defaultdict(set)
    for account, user, partition in state.users:
        members[account].add(user)
        if partition:
            partitions[account].add(partition)
    ldap_groups = {g["name"]: g for g in raw["groups"]}
    for name, row in sorted(state.accounts.items()):
        if name == "root":
            continue
        info = observed.accounts.get(name)
        values = row.values
        entry: dict[str, Any] = {"name": name, "parent": row.parent or "root"}
        if info is not None and info.description and info.description != name:
            entry["description"] = info.description
        if info is not None and info.organization and info.organization not in (name, "root"):
            entry["organization"] = info.organization
        share = values.get("fairshare", "")
        entry["fairshare"] = int(share) if share.isdigit() and share != "1" else None
        entry["qos"] = sorted({q for q in values.get("qos", "").split(",") if q})
        entry["default_qos"] = values.get("default_qos") or None
        entry["partitions"] = sorted(partitions[name])
        limits: dict[str, Any] = {}
        for key in LIMIT_KEYS:
            value = values.get(key, "")
            if not value or value == "-1":
                continue
            limits[key] = {k: str(v) for k, v in parse_tres(value).items()} if "tres" in key else value
            if key in ("grp_jobs", "grp_submit_jobs", "max_jobs", "max_submit_jobs"):
                limits[key] = int(value)
        entry["limits"] = limits
        wanted = sorted(members[name])
        existing = ldap_groups.get(name)
        if existing is None:
            try:
                check_groupname(name, settings.reserved_names())
            except InvalidName as exc:
                problems.append(Problem(f"slurm account {name}", str(exc), kind="slurm_account", name=name))
                continue
            raw["groups"].append({"name": name, "members": wanted})
        elif sorted(existing["members"]) != wanted:
            problems.append(
                Problem(
                    f"slurm account {name}",
                    f"LDAP group {name!r} has other members than the account's associations "
                    f"({len(existing['members'])} vs {len(wanted)}); align them first",
                    kind="slurm_account",
                    name=name,
                )
            )
            continue
        entry["group"] = name
        raw["slurm_accounts"].append(entry)
    first = {user: sorted(accounts)[0] for user, accounts in state.accounts_by_user().items()}
    ldap_users = {u["username"]: u for u in raw["users"]}
    for user, default in sorted(state.defaults.items()):
        if user in first and default != first[user]:
            if user in ldap_users:
                ldap_users[user]["slurm_default_account"] = default
            else:
                raw["users"].append({"username": user, "slurm_default_account": default})
