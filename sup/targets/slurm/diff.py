"""Desired vs observed Slurm accounting -> the ordered list of Changes (pure: no I/O).

Kinds and what each Change's `details` (model.py) hold, as `sup plan --json` shows them (`apply` needs
nothing else):
- account: create {cluster, parent, description?, organization?, <attributes>, blocked?};
  update {cluster, parent?: {old, new}, <attribute>: {old, new}, inherit?: [attributes reset to
  inherit from the parent], blocked?} or, for the global texts, {description?/organization?: {old, new}};
  `blocked` says why it cannot be done as planned (a QoS slurmdbd does not define; a parent that
  cannot be created): apply fails it without running sacctmgr;
  delete {cluster, depth} (only with prune_accounts); report {cluster?, reason}.
- association (name "account/user" or "account/user/partition", subject = user):
  create {cluster, account, user, partition?, fairshare? (user_fairshare), default_account?: true
  (a new user's default), blocked? (the account cannot be created)};
  update {cluster, account, user, partition?, <attribute>: {old, new}, inherit: [...]}, or the block
  of staged offboarding {cluster, account, user, partition?, max_submit_jobs: {old, new: "0"}, reason};
  delete {cluster, account, user, partition?, default_account?: true (the user's default there: it
  goes last, apply.py)}.
- user (subject = user): update {cluster, default_account: {old, new}} or {admin_level: {old, new}};
  report {reason}.
- coordinator (name "account/user", subject = user): add_members / remove_members {account, user};
  report {account, user, reason}.

The order is the order of apply: accounts (parents first), then associations (a new user's default
account first), then modifications (moves, attributes, default accounts, admin levels, new
coordinators), then removals (coordinators, associations, accounts: children first), then reports.
"""

from __future__ import annotations

from collections.abc import Mapping

from sup.targets.base import ADD_MEMBERS, CREATE, DELETE, REMOVE_MEMBERS, REPORT, UPDATE, Change
from sup.targets.slurm.desired import SlurmDesired
from sup.targets.slurm.model import (
    ATTRIBUTES,
    DEFAULT_FAIRSHARE,
    AccountCreate,
    AccountDelete,
    AccountLimits,
    AccountMove,
    AccountTexts,
    AdminLevel,
    AssociationChange,
    ClusterState,
    Coordinator,
    DefaultAccount,
    Limits,
    Observed,
    OldNew,
    Remark,
    SlurmChange,
    same,
)

TARGET = "slurm"
ACCOUNT = "account"
ASSOCIATION = "association"
USER = "user"
COORDINATOR = "coordinator"


def association_name(account: str, user: str, partition: str) -> str:
    return f"{account}/{user}/{partition}" if partition else f"{account}/{user}"


class _Plan:
    """Changes collected by phase, concatenated in apply order at the end."""

    def __init__(self) -> None:
        self.accounts: list[SlurmChange] = []
        self.adds_default: list[SlurmChange] = []
        self.adds: list[SlurmChange] = []
        self.moves: list[SlurmChange] = []
        self.modifications: list[SlurmChange] = []
        self.coordinator_adds: list[SlurmChange] = []
        self.coordinator_removals: list[SlurmChange] = []
        self.removals: list[SlurmChange] = []
        self.account_removals: list[SlurmChange] = []
        self.reports: list[SlurmChange] = []

    def changes(self) -> list[SlurmChange]:
        return [
            *self.accounts,
            *self.adds_default,
            *self.adds,
            *self.moves,
            *self.modifications,
            *self.coordinator_adds,
            *self.coordinator_removals,
            *self.removals,
            *sorted(self.account_removals, key=_deepest_first),
            *self.reports,
        ]


def _deepest_first(change: SlurmChange) -> int:
    return -change.details.depth if isinstance(change.details, AccountDelete) else 0


def plan(desired: SlurmDesired, observed: Observed) -> list[SlurmChange]:
    out = _Plan()
    exists_after: set[str] = set(observed.admin_levels)
    for cluster in desired.clusters:
        state = observed.clusters[cluster]
        exists_after |= _cluster(desired, observed, state, out)
    _texts(desired, observed, out)
    _admin_levels(desired, observed, exists_after, out)
    _coordinators(desired, observed, exists_after, out)
    _reports(desired, out)
    return out.changes()


# --- per cluster -------------------------------------------------------------------------------------


def _expected_account_values(desired: SlurmDesired, state: ClusterState) -> dict[str, dict[str, str]]:
    """What `show association` should print for each SUP account's own row: its own values, else
    (inherited attributes) its parent's, else Slurm's default."""
    expected: dict[str, dict[str, str]] = {}
    for name, spec in desired.accounts.items():  # parents first
        parent_row = state.accounts.get(spec.parent)
        parent = expected.get(spec.parent) or (dict(parent_row.values) if parent_row is not None else {})
        values = {}
        for attr in ATTRIBUTES:
            if attr.key in spec.own:
                values[attr.key] = spec.own[attr.key]
            elif attr.inherited:
                values[attr.key] = parent.get(attr.key, "")
            else:
                values[attr.key] = DEFAULT_FAIRSHARE if attr.key == "fairshare" else ""
        expected[name] = values
    return expected


def _prunable(desired: SlurmDesired, state: ClusterState, unknown: set[str]) -> set[str]:
    """Unknown accounts whose whole subtree goes away (store accounts below them move elsewhere)."""
    children: dict[str, list[str]] = {}
    for name, row in state.accounts.items():
        children.setdefault(row.parent, []).append(name)
    memo: dict[str, bool] = {}

    def ok(name: str) -> bool:
        if name not in memo:
            memo[name] = False  # guards against cycles in a corrupt tree
            memo[name] = name in unknown and all(
                (child in desired.accounts and desired.accounts[child].parent != name) or ok(child)
                for child in children.get(name, [])
            )
        return memo[name]

    return {name for name in unknown if ok(name)}


def _depth(state: ClusterState, name: str) -> int:
    depth, current, seen = 0, name, set()
    while current in state.accounts and current not in seen:
        seen.add(current)
        depth += 1
        current = state.accounts[current].parent
    return depth


def _cluster(desired: SlurmDesired, observed: Observed, state: ClusterState, out: _Plan) -> set[str]:
    """Plan one cluster; returns the users that have an association here afterwards."""
    cluster = state.name
    expected = _expected_account_values(desired, state)

    unknown = {
        name
        for name in state.accounts
        if name not in desired.accounts and name not in desired.ignore_accounts
    }
    pruned = _prunable(desired, state, unknown) if desired.prune_accounts else set()
    for name in sorted(unknown - pruned):
        reason = "not in SUP's store; left alone"
        if desired.prune_accounts:
            reason += " (an account below it is not SUP's to delete)"
        out.reports.append(Change(TARGET, REPORT, ACCOUNT, name, Remark(reason, cluster)))

    # Accounts: create or update their own association row on this cluster. One that names a QoS
    # slurmdbd does not define is planned blocked (apply fails it without calling sacctmgr), and so
    # are the accounts below it and the associations to it while it does not exist.
    not_created: dict[str, str] = {}
    for name, spec in desired.accounts.items():  # parents first
        row = state.accounts.get(name)
        blocked = _qos_blocked(spec.own, observed.qos)
        if row is None:
            if blocked is None and spec.parent in not_created:
                blocked = f"its parent account {spec.parent!r} cannot be created: {not_created[spec.parent]}"
            if blocked is not None:
                not_created[name] = blocked
            create = AccountCreate(
                cluster, spec.parent, spec.description, spec.organization, spec.own, blocked=blocked
            )
            out.accounts.append(Change(TARGET, CREATE, ACCOUNT, name, create))
            continue
        if row.parent != spec.parent:
            move = AccountMove(cluster, OldNew.of(row.parent, spec.parent))
            out.moves.append(Change(TARGET, UPDATE, ACCOUNT, name, move))
        changed: dict[str, OldNew] = {}
        inherit = []
        for attr in ATTRIBUTES:
            want = expected[name][attr.key]
            have = row.values.get(attr.key, "")
            if not same(attr.kind, have, want):
                changed[attr.key] = OldNew.of(have, want)
                if attr.key not in spec.own:
                    inherit.append(attr.key)
        if changed:
            qos_changed = bool(changed.keys() & {"qos", "default_qos"})
            limits = AccountLimits(
                cluster, Limits(changed, tuple(inherit)), blocked=blocked if qos_changed else None
            )
            out.modifications.append(Change(TARGET, UPDATE, ACCOUNT, name, limits))

    for name in sorted(pruned):
        delete = AccountDelete(cluster, _depth(state, name))
        out.account_removals.append(Change(TARGET, DELETE, ACCOUNT, name, delete))

    # Associations: in SUP's accounts (and accounts being pruned) the store is authoritative.
    authoritative = set(desired.accounts) | pruned
    wanted = {
        (spec.name, user, partition)
        for spec in desired.accounts.values()
        for user in spec.members
        for partition in spec.partitions
    }
    present = {key for key in state.users if key[0] in authoritative and key[1] not in desired.ignore_users}
    before = state.accounts_by_user()
    adds = _first_after_identity(desired, state, before, sorted(wanted - present), out)
    # A suspended user's associations are blocked first (both offboarding modes): a removal that
    # slurmdbd refuses while a job of theirs runs must not leave them able to submit. Staged
    # offboarding then keeps the blocked associations until the deadline.
    unwanted = sorted(present - wanted)
    deletes = [key for key in unwanted if not _held(desired, observed, key[1])]
    _blocks(desired, state, [key for key in unwanted if key[1] in desired.suspended], out)

    for account, user, partition in adds:
        name = association_name(account, user, partition)
        # a new user: create them with their default account
        default = user not in before and account == desired.default_account(user)
        blocked = not_created.get(account)
        add = AssociationChange(
            cluster,
            account,
            user,
            partition,
            desired.user_fairshare,
            default,
            blocked=None if blocked is None else f"account {account!r} cannot be created: {blocked}",
        )
        phase = out.adds_default if default else out.adds
        phase.append(Change(TARGET, CREATE, ASSOCIATION, name, add, subject=user))

    for key in sorted(wanted & present):
        _association_drift(desired, state, key, out)

    after: dict[str, set[str]] = {}
    removed = set(deletes)
    for key in state.users:
        if key not in removed:
            after.setdefault(key[1], set()).add(key[0])
    for account, user, _ in adds:
        after.setdefault(user, set()).add(account)
    touched = {(user, account) for account, user, _ in (*adds, *deletes)}
    _default_accounts(desired, state, before, after, touched, out)

    for account, user, partition in deletes:
        # The user's default account: removed last, and only once everything else of the user here
        # went through (apply.py).
        default = state.defaults.get(user) == account
        name = association_name(account, user, partition)
        remove = AssociationChange(cluster, account, user, partition, default_account=default)
        out.removals.append(Change(TARGET, DELETE, ASSOCIATION, name, remove, subject=user))
    return set(after)


def _qos_blocked(own: Mapping[str, str], defined: frozenset[str] | None) -> str | None:
    """Why an account's own QoS values cannot be set: the QoS it names that slurmdbd does not
    define (sacctmgr would refuse the whole command). None: all defined, or the QoS were not read."""
    if defined is None:
        return None
    named = [q for q in own.get("qos", "").split(",") if q] + [q for q in [own.get("default_qos")] if q]
    missing = sorted({q for q in named if q.casefold() not in defined})
    if not missing:
        return None
    listed = ", ".join(repr(q) for q in missing)
    return (
        f"QoS {listed} not defined in slurmdbd (SUP binds accounts to QoS, it does not create them): "
        f"add {'it' if len(missing) == 1 else 'them'} with `sacctmgr add qos NAME`, or take "
        f"{'it' if len(missing) == 1 else 'them'} off the account"
    )


def _first_after_identity(
    desired: SlurmDesired,
    state: ClusterState,
    before: Mapping[str, set[str]],
    adds: list[tuple[str, str, str]],
    out: _Plan,
) -> list[tuple[str, str, str]]:
    """The adds, without those of users new to the cluster whose POSIX identity is not provisioned
    yet (reported instead): slurmctld looks a user up when their first association arrives, and a
    failed lookup is cached, so their jobs would be rejected."""
    kept, waiting = [], set()
    for key in adds:
        user = key[1]
        if user in desired.identity_pending and user not in before:
            waiting.add(user)
        else:
            kept.append(key)
    for user in sorted(waiting):
        reason = "waits for the user's POSIX identity before their first association"
        out.reports.append(Change(TARGET, REPORT, USER, user, Remark(reason, state.name), subject=user))
    return kept


def _held(desired: SlurmDesired, observed: Observed, user: str) -> bool:
    """Kept blocked: before the deadline, unless the running-jobs command says nothing runs."""
    return desired.held(user) and (observed.running is None or user in observed.running)


def _blocks(desired: SlurmDesired, state: ClusterState, keys: list[tuple[str, str, str]], out: _Plan) -> None:
    """MaxSubmitJobs=0 on each association of a suspended user: their running jobs go on, no new
    job is accepted. Set in the modification phase, before any removal, so a removal that slurmdbd
    refuses (a job still runs) leaves the association blocked."""
    for account, user, partition in keys:
        have = state.users[(account, user, partition)].values.get("max_submit_jobs", "")
        if same("int", have, "0"):
            continue
        limits = Limits({"max_submit_jobs": OldNew.of(have, "0")})
        reason = "suspended: no new jobs" + (" (staged offboarding)" if desired.staged else ", then removed")
        block = AssociationChange(state.name, account, user, partition, limits=limits, reason=reason)
        name = association_name(account, user, partition)
        out.modifications.append(Change(TARGET, UPDATE, ASSOCIATION, name, block, subject=user))


def _association_drift(
    desired: SlurmDesired, state: ClusterState, key: tuple[str, str, str], out: _Plan
) -> None:
    """A user association should carry nothing of its own: inherited attributes equal the account's,
    Grp* limits are unset, and Fairshare is `user_fairshare` when that is set."""
    account, user, partition = key
    row = state.users[key]
    account_row = state.accounts.get(account)
    changed: dict[str, OldNew] = {}
    inherit = []
    for attr in ATTRIBUTES:
        have = row.values.get(attr.key, "")
        if attr.key == "fairshare":
            if desired.user_fairshare is None or same(attr.kind, have, desired.user_fairshare):
                continue
            changed[attr.key] = OldNew.of(have, desired.user_fairshare)
            continue
        if attr.inherited:
            # Compared with the account's row as it is now: when the account changes, Slurm passes
            # the new value on to every user association that has none of its own.
            if account_row is None:
                continue
            want = account_row.values.get(attr.key, "")
        else:
            want = ""
        if not same(attr.kind, have, want):
            changed[attr.key] = OldNew.of(have, want)
            inherit.append(attr.key)
    if changed:
        limits = Limits(changed, tuple(inherit))
        update = AssociationChange(state.name, account, user, partition, limits=limits)
        name = association_name(account, user, partition)
        out.modifications.append(Change(TARGET, UPDATE, ASSOCIATION, name, update, subject=user))


def _default_accounts(
    desired: SlurmDesired,
    state: ClusterState,
    before: Mapping[str, set[str]],
    after: Mapping[str, set[str]],
    touched: set[tuple[str, str]],
    out: _Plan,
) -> None:
    """Every user keeps a default account among the accounts they will have; a new default is set in
    the modification phase, before the removals take the old one away.

    Slurm marks one association row as the default. When rows of the default account are added or
    removed (partitions changed), the default is set again after the adds: that marks every row of
    the account, so the default survives the removal of whichever row held it."""
    for user in sorted(after):
        if user in desired.ignore_users or not after[user]:
            continue
        have = state.defaults.get(user)
        want = desired.default_account(user) if user in desired.users else None
        if want is None:  # not SUP's to choose: keep what Slurm has while it stays valid
            want = have if have in after[user] else min(after[user])
        if user not in before:
            continue  # created in this pass with DefaultAccount set
        if have != want:
            details = DefaultAccount(state.name, OldNew.of(have, want))
            out.modifications.append(Change(TARGET, UPDATE, USER, user, details, subject=user))
        elif (user, want) in touched:
            reason = "the partitions of the default account change"
            details = DefaultAccount(state.name, OldNew.of(have, want), reason)
            out.modifications.append(Change(TARGET, UPDATE, USER, user, details, subject=user))


# --- global ------------------------------------------------------------------------------------------


def _texts(desired: SlurmDesired, observed: Observed, out: _Plan) -> None:
    """Description and organization are global. Slurm 22.05 stores them lower-case: compare casefolded."""
    for name, spec in desired.accounts.items():
        info = observed.accounts.get(name)
        if info is None:
            continue
        description = organization = None
        if spec.description is not None and info.description.casefold() != spec.description.casefold():
            description = OldNew.of(info.description, spec.description)
        if spec.organization is not None and info.organization.casefold() != spec.organization.casefold():
            organization = OldNew.of(info.organization, spec.organization)
        if description is not None or organization is not None:
            texts = AccountTexts(description, organization)
            out.modifications.append(Change(TARGET, UPDATE, ACCOUNT, name, texts))


def _admin_levels(desired: SlurmDesired, observed: Observed, exists_after: set[str], out: _Plan) -> None:
    if desired.admin_levels is None:
        return
    for user, want in sorted(desired.admin_levels.items()):
        if user not in exists_after:
            if want != "None":
                reason = f"should be {want} but has no Slurm user (no association): AdminLevel cannot be set"
                out.reports.append(Change(TARGET, REPORT, USER, user, Remark(reason), subject=user))
            continue
        have = observed.admin_levels.get(user, "None")
        if have.casefold() != want.casefold():
            level = AdminLevel(OldNew.of(have, want))
            out.modifications.append(Change(TARGET, UPDATE, USER, user, level, subject=user))


def _coordinators(desired: SlurmDesired, observed: Observed, exists_after: set[str], out: _Plan) -> None:
    """Slurm shows an account's coordinators together with those of its ancestors (a coordinator of
    an account coordinates its sub-accounts), so the expectation includes the parent's."""
    expected: dict[str, frozenset[str]] = {}
    for name, spec in desired.accounts.items():
        info = observed.accounts.get(name)
        have = info.coordinators if info is not None else frozenset()
        parent_info = observed.accounts.get(spec.parent)
        inherited = expected.get(
            spec.parent, parent_info.coordinators if parent_info is not None else frozenset()
        )
        expected[name] = spec.coordinators | inherited
        for user in sorted(spec.coordinators - have):
            change_name = f"{name}/{user}"
            if user in exists_after:
                add = Coordinator(name, user)
                out.coordinator_adds.append(
                    Change(TARGET, ADD_MEMBERS, COORDINATOR, change_name, add, subject=user)
                )
            else:
                reason = "has no Slurm user (no association anywhere): cannot coordinate"
                refused = Coordinator(name, user, reason)
                out.reports.append(Change(TARGET, REPORT, COORDINATOR, change_name, refused, subject=user))
        for user in sorted(have - expected[name] - desired.ignore_users):
            remove = Coordinator(name, user)
            out.coordinator_removals.append(
                Change(TARGET, REMOVE_MEMBERS, COORDINATOR, f"{name}/{user}", remove, subject=user)
            )


def _reports(desired: SlurmDesired, out: _Plan) -> None:
    for name in desired.ignored_store_accounts:
        reason = "in SUP's store but listed in slurm.ignore_accounts: left alone"
        out.reports.append(Change(TARGET, REPORT, ACCOUNT, name, Remark(reason)))
    for user, chosen in sorted(desired.explicit_defaults.items()):
        accounts = desired.accounts_of(user)
        if accounts and chosen not in accounts:
            reason = (
                f"chosen default account {chosen!r} is not one of their accounts; {accounts[0]!r} is used"
            )
            out.reports.append(Change(TARGET, REPORT, USER, user, Remark(reason)))
