"""What Slurm accounting holds, as SUP models it: associations with their attributes, per cluster.

Attribute values are kept as the strings sacctmgr prints and accepts ("cpu=10,mem=20G", "2-00:00:00",
"high,normal", "" for unset) and compared through `normalize`, which makes equal what Slurm treats as
equal (mem=20480 is mem=20G, 120 minutes is 02:00:00, QOS order does not matter).

Inheritance (as slurmdbd reports it): an association without its own QOS, DefaultQOS, MaxJobs,
MaxSubmit, MaxWall or MaxTRES shows its parent's value; Fairshare and the Grp* limits are its own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sup.targets.base import Change

Kind = Literal["share", "qos", "name", "tres", "int", "time"]


@dataclass(frozen=True)
class Attribute:
    key: str  # the name in Change details, e.g. "max_wall"
    show: str  # the column of `sacctmgr show association format=...`
    option: str  # the option of add/modify, e.g. "MaxWall"
    kind: Kind
    inherited: bool


ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute("fairshare", "Fairshare", "Fairshare", "share", inherited=False),
    Attribute("qos", "QOS", "QOS", "qos", inherited=True),
    Attribute("default_qos", "DefaultQOS", "DefaultQOS", "name", inherited=True),
    Attribute("grp_tres", "GrpTRES", "GrpTRES", "tres", inherited=False),
    Attribute("grp_jobs", "GrpJobs", "GrpJobs", "int", inherited=False),
    Attribute("grp_submit_jobs", "GrpSubmit", "GrpSubmitJobs", "int", inherited=False),
    Attribute("grp_wall", "GrpWall", "GrpWall", "time", inherited=False),
    Attribute("max_jobs", "MaxJobs", "MaxJobs", "int", inherited=True),
    Attribute("max_submit_jobs", "MaxSubmit", "MaxSubmitJobs", "int", inherited=True),
    Attribute("max_wall", "MaxWall", "MaxWall", "time", inherited=True),
    Attribute("max_tres_per_job", "MaxTRES", "MaxTRES", "tres", inherited=True),
)
BY_KEY: Mapping[str, Attribute] = {a.key: a for a in ATTRIBUTES}
# Limits of the store's SlurmLimits, by the same keys (fairshare, qos and default_qos are columns).
LIMIT_KEYS = tuple(a.key for a in ATTRIBUTES if a.key not in ("fairshare", "qos", "default_qos"))
DEFAULT_FAIRSHARE = "1"  # what Slurm gives an association that names none

# A value as sacctmgr shows it; "" means unset.
Values = Mapping[str, str]

_UNITS: dict[str, int] = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}
_TRES_ITEM = re.compile(r"([0-9]+)([KMGTP]?)")


def _tres_amount(name: str, amount: str) -> int | str:
    match = _TRES_ITEM.fullmatch(amount.strip().upper())
    if not match:
        return amount.strip()
    number, unit = int(match.group(1)), match.group(2)
    if name != "mem":
        return number * int(1024 ** _UNITS[unit])
    exponent = _UNITS[unit or "M"] - _UNITS["M"]  # memory is counted in MiB; a bare number is MiB
    return number * int(1024**exponent) if exponent >= 0 else number // 1024


def parse_tres(text: str) -> dict[str, int | str]:
    """ "cpu=10,mem=20G" -> {"cpu": 10, "mem": 20480}; entries set to -1 (cleared) are dropped."""
    result: dict[str, int | str] = {}
    for item in text.split(","):
        name, sep, amount = item.strip().partition("=")
        if not sep or not name:
            continue
        if amount.strip() == "-1":
            continue
        result[name.strip().lower()] = _tres_amount(name.strip().lower(), amount)
    return result


def tres_text(tres: Mapping[str, object]) -> str:
    return ",".join(f"{name}={tres[name]}" for name in sorted(tres))


def minutes(text: str) -> int | str:
    """Slurm time (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) in whole minutes, as slurmdbd stores it."""
    text = text.strip()
    days = 0
    rest = text
    if "-" in text:
        head, rest = text.split("-", 1)
        if not head.isdigit():
            return text
        days = int(head)
    parts = rest.split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        return text
    numbers = [int(p) for p in parts]
    if days or "-" in text:
        hours, mins, secs = [*numbers, 0, 0][:3]
    elif len(numbers) == 1:
        hours, mins, secs = 0, numbers[0], 0
    elif len(numbers) == 2:
        hours, mins, secs = 0, numbers[0], numbers[1]
    else:
        hours, mins, secs = numbers
    total = ((days * 24 + hours) * 60 + mins) * 60 + secs
    return (total + 59) // 60


def normalize(kind: Kind, text: str | None) -> object:
    """A comparable form of a value; None for unset."""
    if text is None or text.strip() in ("", "-1"):
        return None
    text = text.strip()
    if kind == "qos":
        names = sorted({q.strip().lower() for q in text.split(",") if q.strip()})
        return tuple(names) or None
    if kind == "tres":
        return tuple(sorted(parse_tres(text).items())) or None
    if kind == "int":
        return int(text) if text.isdigit() else text
    if kind == "time":
        return minutes(text)
    return text.lower()


def same(kind: Kind, a: str | None, b: str | None) -> bool:
    return normalize(kind, a) == normalize(kind, b)


# --- what was observed ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Association:
    """One row of `sacctmgr show association`: an account's own row has user == ""."""

    cluster: str
    account: str
    user: str
    partition: str
    parent: str  # for account rows: the parent account
    values: Values

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.account, self.user, self.partition)


@dataclass
class ClusterState:
    name: str
    accounts: dict[str, Association] = field(default_factory=dict)  # account rows, by account
    users: dict[tuple[str, str, str], Association] = field(default_factory=dict)  # (account, user, part.)
    defaults: dict[str, str] = field(default_factory=dict)  # user -> default account on this cluster

    def accounts_by_user(self) -> dict[str, set[str]]:
        index: dict[str, set[str]] = {}
        for account, user, _ in self.users:
            index.setdefault(user, set()).add(account)
        return index


@dataclass(frozen=True)
class AccountInfo:
    """What is global about an account (not per cluster): texts and coordinators."""

    name: str
    description: str
    organization: str
    coordinators: frozenset[str]


@dataclass
class Observed:
    clusters: dict[str, ClusterState]
    accounts: dict[str, AccountInfo]
    admin_levels: dict[str, str]  # every Slurm user -> "None" | "Operator" | "Administrator"
    # Users with jobs still running (slurm.running_jobs_command); None: not known (no command, or
    # it failed), and then staged offboarding waits for its deadline.
    running: frozenset[str] | None = None
    # The QoS slurmdbd defines, casefolded (a full pass reads them); None: not read, nothing checked.
    qos: frozenset[str] | None = None


# --- change details: what a plan says and apply.py performs ----------------------------------------


@dataclass(frozen=True)
class OldNew:
    """A value before and after; None is unset."""

    old: str | None
    new: str | None

    @classmethod
    def of(cls, old: str | None, new: str | None) -> OldNew:
        """As sacctmgr shows them: "" is unset too."""
        return cls(old or None, new or None)

    def as_json(self) -> dict[str, Any]:
        return {"old": self.old, "new": self.new}


@dataclass(frozen=True)
class Limits:
    """Attributes to set, by key (model.ATTRIBUTES), and those to reset to inherit from the parent."""

    changed: Mapping[str, OldNew]
    inherit: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {key: change.as_json() for key, change in self.changed.items()}
        if self.inherit:
            shown["inherit"] = list(self.inherit)
        return shown


@dataclass(frozen=True)
class AccountCreate:
    cluster: str
    parent: str
    description: str | None
    organization: str | None
    own: Mapping[str, str]  # attribute key -> value as sacctmgr takes it
    # Why the plan cannot be carried out as it stands (a QoS slurmdbd does not define): apply fails
    # the change with this and runs no sacctmgr for it.
    blocked: str | None = None

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"cluster": self.cluster, "parent": self.parent}
        if self.description is not None:
            shown["description"] = self.description
        if self.organization is not None:
            shown["organization"] = self.organization
        return shown | dict(self.own) | ({"blocked": self.blocked} if self.blocked else {})


@dataclass(frozen=True)
class AccountMove:
    cluster: str
    parent: OldNew

    def as_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "parent": self.parent.as_json()}


@dataclass(frozen=True)
class AccountLimits:
    """The attributes of an account's own association row on one cluster."""

    cluster: str
    limits: Limits
    blocked: str | None = None  # as AccountCreate's

    def as_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, **self.limits.as_json()} | (
            {"blocked": self.blocked} if self.blocked else {}
        )


@dataclass(frozen=True)
class AccountTexts:
    """Description and organization: global, not per cluster."""

    description: OldNew | None = None
    organization: OldNew | None = None

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {}
        if self.description is not None:
            shown["description"] = self.description.as_json()
        if self.organization is not None:
            shown["organization"] = self.organization.as_json()
        return shown


@dataclass(frozen=True)
class AccountDelete:
    cluster: str
    depth: int  # in the observed tree: children are deleted before their parents

    def as_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "depth": self.depth}


@dataclass(frozen=True)
class AssociationChange:
    """A user association (`partition` "" for none): `create` (with `fairshare` and `default_account`),
    `update` (with `limits`; a `reason` for the block of staged offboarding) or `delete` (with
    `default_account`: it is the user's default there, removed last)."""

    cluster: str
    account: str
    user: str
    partition: str = ""
    fairshare: str | None = None
    default_account: bool = False  # create: the new user's default; delete: the user's default here
    limits: Limits | None = None
    reason: str | None = None
    blocked: str | None = None  # as AccountCreate's (create: the account could not be created)

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"cluster": self.cluster, "account": self.account, "user": self.user}
        if self.blocked is not None:
            shown["blocked"] = self.blocked
        if self.partition:
            shown["partition"] = self.partition
        if self.fairshare is not None:
            shown["fairshare"] = self.fairshare
        if self.default_account:
            shown["default_account"] = True
        if self.limits is not None:
            shown.update(self.limits.as_json())
        if self.reason is not None:
            shown["reason"] = self.reason
        return shown


@dataclass(frozen=True)
class DefaultAccount:
    cluster: str
    default_account: OldNew
    reason: str | None = None

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"cluster": self.cluster, "default_account": self.default_account.as_json()}
        if self.reason is not None:
            shown["reason"] = self.reason
        return shown


@dataclass(frozen=True)
class AdminLevel:
    admin_level: OldNew

    def as_json(self) -> dict[str, Any]:
        return {"admin_level": self.admin_level.as_json()}


@dataclass(frozen=True)
class Coordinator:
    """`add_members` / `remove_members`, or a `report` (with the reason) when it cannot be added."""

    account: str
    user: str
    reason: str | None = None

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"account": self.account, "user": self.user}
        if self.reason is not None:
            shown["reason"] = self.reason
        return shown


@dataclass(frozen=True)
class Remark:
    """A `report`: something SUP leaves alone, and why."""

    reason: str
    cluster: str | None = None

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {} if self.cluster is None else {"cluster": self.cluster}
        return shown | {"reason": self.reason}


SlurmDetails = (
    AccountCreate
    | AccountMove
    | AccountLimits
    | AccountTexts
    | AccountDelete
    | AssociationChange
    | DefaultAccount
    | AdminLevel
    | Coordinator
    | Remark
)
SlurmChange = Change[SlurmDetails]
