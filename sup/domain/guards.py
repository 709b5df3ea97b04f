"""Mass-change guards: an identity provider or a file that suddenly lists nobody must not suspend or
delete everybody. One rule for the reconciler (before a plan reaches a target), the Keycloak pull and
`sup import --prune`; each answers with why it refuses, and `--force` overrides it.

The limits are the reconcile settings (`reconcile.max_deletions`, `max_suspensions`,
`max_suspension_share`); the rules read them through `MassChangeLimits`, so `settings.reconcile`
is passed as it is and the rules stay pure.

Those limits compare one pass with the target's state after the previous one, so removals that
trickle in a few per pass never trip them. `budget_refusal` adds a budget over a time window
(`reconcile.suspension_budget`, `suspension_budget_share`, `deletion_budget`,
`budget_window_seconds`): what a target already spent in the window (`Spent`, kept in the store by
the reconciler) plus what this plan would spend. A forced pass is the operator vouching for what was
spent so far: the store starts counting afresh after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

MIN_USERS_FOR_SHARE = 5  # the share limit counts only above this many users
SHOWN = 5  # names quoted in a refusal


class MassChangeLimits(Protocol):
    @property
    def max_deletions(self) -> int: ...

    @property
    def max_suspensions(self) -> int: ...

    @property
    def max_suspension_share(self) -> float: ...


class BudgetLimits(Protocol):
    @property
    def suspension_budget(self) -> int: ...

    @property
    def suspension_budget_share(self) -> float: ...

    @property
    def deletion_budget(self) -> int: ...

    @property
    def budget_window_seconds(self) -> int: ...


@dataclass(frozen=True)
class Spent:
    """What a target already spent of its budgets in the window: users it stopped holding active
    (locked or removed) and objects deleted, by passes that were not forced."""

    suspensions: int = 0
    deletions: int = 0


def too_many_suspensions(count: int, total: int, limits: MassChangeLimits) -> bool:
    """Whether locking or removing `count` of `total` active users is over the limits."""
    limit, share = limits.max_suspensions, limits.max_suspension_share
    return count > limit or (count > MIN_USERS_FOR_SHARE and total > 0 and count / total > share)


def mass_change(leaving: Sequence[str], total: int, limits: MassChangeLimits) -> str | None:
    """Why applying would lock or remove too many of the users a target holds active, or None.

    `leaving`: the users the target was last left holding active (status rows, not the store) that
    the desired state no longer keeps active; `total`: how many it holds active. The status rows,
    because an identity provider that suddenly reports everybody gone changes the store first, and
    the reconciler is where that must stop before it reaches the cluster.
    """
    count = len(leaving)
    if not too_many_suspensions(count, total, limits):
        return None
    return (
        f"the plan locks or removes {count} of the {total} users active on this target ({_shown(leaving)}), "
        f"over reconcile.max_suspensions={limits.max_suspensions} or max_suspension_share="
        f"{limits.max_suspension_share:g}; check it with `sup plan` and rerun with --force if it is right"
    )


def prune_refusal(
    suspend: Sequence[str], deletes: int, active_users: int, limits: MassChangeLimits
) -> str | None:
    """Why `sup import --prune` must not suspend the users `suspend` (of `active_users`) and delete
    `deletes` groups without --force, or None. The reconciler checks again before a target changes."""
    if too_many_suspensions(len(suspend), active_users, limits):
        return (
            f"--prune would suspend {len(suspend)} of the {active_users} active users ({_shown(suspend)}), "
            f"over reconcile.max_suspensions={limits.max_suspensions} or max_suspension_share="
            f"{limits.max_suspension_share:g}; check with --dry-run, rerun with --force if right"
        )
    if deletes > limits.max_deletions:
        return (
            f"--prune would delete {deletes} groups, more than reconcile.max_deletions="
            f"{limits.max_deletions}; check with --dry-run and rerun with --force if it is right"
        )
    return None


def budget_refusal(
    spent: Spent, leaving: Sequence[str], deletions: int, active: int, limits: BudgetLimits
) -> str | None:
    """Why a plan that locks or removes the users `leaving` and deletes `deletions` objects must not
    be applied on a target that holds `active` users active and already `spent` this much in the
    window, or None. A plan that spends nothing is never refused (the budget holds back removals,
    not the rest of the work)."""
    window = limits.budget_window_seconds
    if window <= 0:
        return None
    users = spent.suspensions + len(leaving)
    held = active + spent.suspensions  # active at the window's start, roughly: now plus those removed since
    budget, share = limits.suspension_budget, limits.suspension_budget_share
    if leaving and (users > budget or (users > MIN_USERS_FOR_SHARE and users / held > share)):
        return (
            f"the plan locks or removes {len(leaving)} users ({_shown(sorted(leaving))}) on a target that "
            f"already locked or removed {spent.suspensions} in the last {_duration(window)}: "
            f"{users} of the {held} users it held active, over reconcile.suspension_budget={budget} or "
            f"suspension_budget_share={share:g} per budget_window_seconds={window}; removals that trickle "
            "in below the per-pass limits stop here: check them with `sup plan` and the audit log, and "
            "rerun with --force if they are right"
        )
    total = spent.deletions + deletions
    if deletions and total > limits.deletion_budget:
        return (
            f"the plan deletes {deletions} objects on a target that already deleted {spent.deletions} in "
            f"the last {_duration(window)}: {total}, over reconcile.deletion_budget="
            f"{limits.deletion_budget} per budget_window_seconds={window}; check them with `sup plan` "
            "and rerun with --force if they are right"
        )
    return None


def _duration(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"


def _shown(names: Sequence[str]) -> str:
    return ", ".join(names[:SHOWN]) + (", ..." if len(names) > SHOWN else "")
