"""`sup import --from-slurm` (the spec's adopt hook): the accounts of `slurm.cluster` below root with
their parent, texts, fairshare, QOS and limits; the users associated with an account become the
members of the group of the same name (the group an earlier adoption, LDAP's, already has, when its
members agree), and a user's default account is kept. Coordinators are not adopted. Read with the
target's own `observe`, the same bulk read a reconcile does."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sup.domain.posix import InvalidName, check_groupname
from sup.targets.adoption import Adoption, AdoptionError, AdoptionProblem
from sup.targets.base import ObserveError, TargetError
from sup.targets.slurm.model import LIMIT_KEYS, parse_tres
from sup.targets.slurm.settings import SlurmSettings
from sup.targets.slurm.target import SlurmTarget
from sup.targets.spec import TargetContext


def adopt(context: TargetContext[SlurmSettings], adoption: Adoption) -> None:
    target = SlurmTarget(context)
    try:
        observed = target.observe()
    except (ObserveError, TargetError) as exc:
        raise AdoptionError(f"cannot read slurm: {exc}") from exc
    finally:
        target.close()
    cluster_name = context.settings.cluster.lower()
    state = observed.clusters.get(cluster_name)
    if state is None:
        raise AdoptionError(f"slurmdbd has no cluster {cluster_name!r}")
    members: dict[str, set[str]] = defaultdict(set)
    partitions: dict[str, set[str]] = defaultdict(set)
    for account, user, partition in state.users:
        members[account].add(user)
        if partition:
            partitions[account].add(partition)
    known_groups = {g["name"]: g for g in adoption.groups}
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
        existing = known_groups.get(name)
        if existing is None:
            try:
                check_groupname(name, adoption.reserved_names)
            except InvalidName as exc:
                adoption.problems.append(
                    AdoptionProblem(f"slurm account {name}", str(exc), kind="slurm_account", name=name)
                )
                continue
            adoption.groups.append({"name": name, "members": wanted})
        elif sorted(existing["members"]) != wanted:
            adoption.problems.append(
                AdoptionProblem(
                    f"slurm account {name}",
                    f"LDAP group {name!r} has other members than the account's associations "
                    f"({len(existing['members'])} vs {len(wanted)}); align them first",
                    kind="slurm_account",
                    name=name,
                )
            )
            continue
        entry["group"] = name
        adoption.slurm_accounts.append(entry)
    first = {user: sorted(accounts)[0] for user, accounts in state.accounts_by_user().items()}
    known_users = {u["username"]: u for u in adoption.users}
    for user, default in sorted(state.defaults.items()):
        if user in first and default != first[user]:
            if user in known_users:
                known_users[user]["slurm_default_account"] = default
            else:
                adoption.users.append({"username": user, "slurm_default_account": default})
