"""Parsing `sacctmgr -n -P show ...` output (one record a line, fields separated by '|').

Every read names its columns explicitly (`format=...`), so a line with another number of fields is
not ours to guess about: it raises ObserveError and nothing is decided from the read. The one
free-text column, an account's Description, goes last: a '|' inside it stays in the description,
and a line break inside it (which `-P` does not escape) continues the previous record.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sup.targets.base import ObserveError
from sup.targets.slurm.model import ATTRIBUTES, AccountInfo, Association

ASSOCIATION_FIELDS: tuple[str, ...] = (
    "Cluster",
    "Account",
    "User",
    "Partition",
    "ParentName",
    *(a.show for a in ATTRIBUTES),
)
# `show user where cluster=C`: every user, with the default account on C ("" if none) and AdminLevel.
# A scoped pass reads its few users so; a full pass reads DEFAULT_FIELDS and LEVEL_FIELDS instead:
# slurmdbd looks each user's default account up on its own (0.8 s for 10,000 users, against 0.15 s
# without the column and 0.5 s for the default associations).
USER_FIELDS = ("User", "DefaultAccount", "AdminLevel")
# `show user` (no cluster): every user's AdminLevel, which is not per cluster.
LEVEL_FIELDS = ("User", "AdminLevel")
# `show association where cluster=C onlydefaults`: each user's default association on C (is_def).
DEFAULT_FIELDS = ("User", "Account")
ONLY_DEFAULTS = "OnlyDefaults"
ACCOUNT_FIELDS = ("Account", "Coordinators", "Organization", "Description")
CLUSTER_FIELDS = ("Cluster",)
QOS_FIELDS = ("Name",)

_ACCOUNT_NAME = re.compile(r"^[a-z0-9_][a-z0-9_.-]*$")


def _rows(text: str, fields: Sequence[str], what: str) -> list[list[str]]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        values = line.split("|")
        if len(values) != len(fields):
            raise ObserveError(
                f"unexpected sacctmgr output for {what}, line {number}: {len(values)} fields, "
                f"expected {len(fields)} ({','.join(fields)})"
            )
        rows.append([v.strip() for v in values])
    return rows


def clusters(text: str) -> set[str]:
    return {row[0].lower() for row in _rows(text, CLUSTER_FIELDS, "clusters") if row[0]}


def qos_names(text: str) -> frozenset[str]:
    """The QoS slurmdbd defines, casefolded (Slurm compares QoS names without case)."""
    return frozenset(row[0].casefold() for row in _rows(text, QOS_FIELDS, "QoS") if row[0])


def associations(text: str, cluster: str) -> list[Association]:
    result = []
    for row in _rows(text, ASSOCIATION_FIELDS, "associations"):
        if row[0].lower() != cluster:
            raise ObserveError(f"asked for the associations of cluster {cluster!r}, got one of {row[0]!r}")
        values = {a.key: row[5 + i] for i, a in enumerate(ATTRIBUTES)}
        result.append(
            Association(
                cluster=cluster,
                account=row[1].lower(),
                user=row[2].lower(),
                partition=row[3].lower(),
                parent=row[4].lower(),
                values=values,
            )
        )
    return result


def admin_levels(text: str) -> dict[str, str]:
    """user -> AdminLevel, from `show user` with LEVEL_FIELDS."""
    return {user.lower(): level or "None" for user, level in _rows(text, LEVEL_FIELDS, "users")}


def default_accounts(text: str) -> dict[str, str]:
    """user -> default account on the cluster asked for, from its default associations (a user
    with an association per partition has several rows, all of the one default account)."""
    defaults: dict[str, str] = {}
    for user, account in _rows(text, DEFAULT_FIELDS, "default associations"):
        if user and account:
            defaults.setdefault(user.lower(), account.lower())
    return defaults


def users(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """(user -> default account on the cluster asked for, user -> AdminLevel) from `show user`."""
    defaults: dict[str, str] = {}
    levels: dict[str, str] = {}
    for user, default, level in _rows(text, USER_FIELDS, "users"):
        if default:
            defaults[user.lower()] = default.lower()
        levels[user.lower()] = level or "None"
    return defaults, levels


def accounts(text: str) -> dict[str, AccountInfo]:
    records: list[list[str]] = []
    for line in text.splitlines():
        head = line.split("|", len(ACCOUNT_FIELDS) - 1)
        if len(head) == len(ACCOUNT_FIELDS) and _ACCOUNT_NAME.fullmatch(head[0].strip().lower()):
            records.append(head)
        elif records:  # a line break inside the previous description
            records[-1][-1] += "\n" + line
        elif line.strip():
            raise ObserveError(f"unexpected sacctmgr output for accounts: {line[:80]!r}")
    result = {}
    for name, coordinators, organization, description in records:
        key = name.strip().lower()
        result[key] = AccountInfo(
            name=key,
            description=description,
            organization=organization.strip(),
            coordinators=frozenset(c.strip().lower() for c in coordinators.split(",") if c.strip()),
        )
    return result
