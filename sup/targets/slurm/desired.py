"""What Slurm accounting should hold, from the desired state and the `slurm` settings (pure).

Rules that are Slurm's own and live here:
- SUP manages the accounts of its store except root and `ignore_accounts`; users are the desired
  users except root and `ignore_users`.
- An account's members get one association per listed partition (or one without a partition).
- A user's default account: their explicit choice while they are a member of it, else the first of
  their accounts by name: deterministic, and the same on every cluster.
- AdminLevel (only when `admin_groups` is set): the highest level of any admin group the user is an
  active member of, else None; a locked user is None.
- Offboarding (`offboarding`): a suspended user's associations go at once (`remove`), or (`staged`)
  are first blocked (MaxSubmitJobs=0: running jobs finish, no new ones start) and removed once
  `offboarding_deadline` has passed since the suspension. A suspension with no recorded time counts
  as past the deadline (the old behaviour, bounded), never as a hold without end.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field

from sup.domain.desired import DesiredAccount, DesiredState
from sup.domain.slurm import ROOT_ACCOUNT
from sup.targets.slurm.model import DEFAULT_FAIRSHARE, LIMIT_KEYS, tres_text
from sup.targets.slurm.settings import SlurmSettings

ADMIN_LEVELS = ("None", "Operator", "Administrator")  # lowest first
ROOT_USER = "root"
_NEVER = datetime.datetime.max.replace(tzinfo=datetime.UTC)


@dataclass(frozen=True)
class AccountSpec:
    name: str
    parent: str
    description: str | None
    organization: str | None
    own: Mapping[str, str]  # attribute key -> value as sacctmgr takes it; absent: unset (inherit/default)
    partitions: tuple[str, ...]  # ("",) for an association without partition
    members: frozenset[str]
    coordinators: frozenset[str]
    depth: int  # 1 for a child of root


@dataclass(frozen=True)
class SlurmDesired:
    clusters: tuple[str, ...]
    accounts: Mapping[str, AccountSpec]  # parents before children
    users: frozenset[str]  # users SUP manages (desired users that are not ignored)
    explicit_defaults: Mapping[str, str]
    admin_levels: Mapping[str, str] | None  # None: SUP does not manage AdminLevel
    ignore_accounts: frozenset[str]
    ignore_users: frozenset[str]
    ignored_store_accounts: tuple[str, ...] = ()
    user_fairshare: str | None = None
    prune_accounts: bool = False
    staged: bool = False  # offboarding == "staged"
    suspended: Mapping[str, datetime.datetime | None] = field(default_factory=dict)  # user -> since
    deadline: datetime.timedelta = datetime.timedelta(0)
    now: datetime.datetime = _NEVER  # when the plan is made (the target's clock)
    identity_pending: frozenset[str] = frozenset()  # no POSIX identity yet: no first association
    _accounts_of: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        index: dict[str, list[str]] = {}
        for spec in self.accounts.values():
            for user in spec.members:
                index.setdefault(user, []).append(spec.name)
        self._accounts_of.update({user: tuple(sorted(names)) for user, names in index.items()})

    def accounts_of(self, user: str) -> tuple[str, ...]:
        return self._accounts_of.get(user, ())

    def default_account(self, user: str) -> str | None:
        """The explicit default while the user is a member of it, else their first account by name."""
        accounts = self.accounts_of(user)
        if not accounts:
            return None
        explicit = self.explicit_defaults.get(user)
        return explicit if explicit in accounts else accounts[0]

    def offboarding(self, user: str) -> bool:
        """Staged offboarding applies to this suspended user: block their associations first."""
        return self.staged and user in self.suspended

    def held(self, user: str) -> bool:
        """A suspended user whose blocked associations stay until the deadline (staged offboarding)."""
        if not self.offboarding(user):
            return False
        since = self.suspended[user]
        if since is None:
            return False
        if since.tzinfo is None:  # SQLite hands back naive datetimes; the store writes UTC
            since = since.replace(tzinfo=datetime.UTC)
        return self.now < since + self.deadline


def own_values(account: DesiredAccount) -> dict[str, str]:
    """The attributes the store sets on the account, in sacctmgr's input syntax."""
    own: dict[str, str] = {
        "fairshare": str(account.fairshare) if account.fairshare is not None else DEFAULT_FAIRSHARE
    }
    if account.qos:
        own["qos"] = ",".join(sorted(account.qos))
    if account.default_qos:
        own["default_qos"] = account.default_qos
    for key in LIMIT_KEYS:
        value = account.limits.get(key)
        if value is None:
            continue
        own[key] = tres_text(value) if isinstance(value, Mapping) else str(value)
    return own


def _depths(accounts: Mapping[str, DesiredAccount]) -> dict[str, int]:
    depths: dict[str, int] = {}
    for name in accounts:
        chain: list[str] = []
        current = name
        while current in accounts and current not in depths and current not in chain:
            chain.append(current)
            current = accounts[current].parent
        base = depths.get(current, 0)
        for offset, item in enumerate(reversed(chain), 1):
            depths[item] = base + offset
    return depths


def build(
    desired: DesiredState, settings: SlurmSettings, now: datetime.datetime | None = None
) -> SlurmDesired:
    """`now` (the target's clock) decides which staged offboardings have reached their deadline."""
    ignore_accounts = frozenset({ROOT_ACCOUNT, *settings.ignore_accounts})
    ignore_users = frozenset({ROOT_USER, *settings.ignore_users})
    users = frozenset(name for name in desired.users if name not in ignore_users)
    depths = _depths(desired.accounts)
    specs: dict[str, AccountSpec] = {}
    for name in sorted(desired.accounts, key=lambda n: (depths[n], n)):
        if name in ignore_accounts:
            continue
        account = desired.accounts[name]
        specs[name] = AccountSpec(
            name=name,
            parent=account.parent,
            description=account.description,
            organization=account.organization,
            own=own_values(account),
            partitions=tuple(sorted({p.lower() for p in account.partitions})) or ("",),
            members=account.members & users,
            coordinators=account.coordinators & users,
            depth=depths[name],
        )
    levels: dict[str, str] | None = None
    if settings.admin_groups:
        levels = {}
        for user in users:
            granted = [
                level
                for group, level in settings.admin_groups.items()
                if group in desired.groups and user in desired.groups[group].members
            ]
            levels[user] = max(granted, key=ADMIN_LEVELS.index, default="None")
    return SlurmDesired(
        clusters=tuple(settings.all_clusters()),
        accounts=specs,
        users=users,
        explicit_defaults={
            name: user.default_account
            for name, user in desired.users.items()
            if user.default_account is not None and name in users
        },
        admin_levels=levels,
        ignore_accounts=ignore_accounts,
        ignore_users=ignore_users,
        ignored_store_accounts=tuple(sorted(set(desired.accounts) & ignore_accounts)),
        user_fairshare=str(settings.user_fairshare) if settings.user_fairshare is not None else None,
        prune_accounts=settings.prune_accounts,
        staged=settings.offboarding == "staged",
        suspended={
            name: user.suspended_at
            for name, user in desired.users.items()
            if not user.active and name in users
        },
        deadline=settings.deadline(),
        now=now or datetime.datetime.now(datetime.UTC),
        identity_pending=desired.identity_pending & users,
    )
