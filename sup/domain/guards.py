"""Mass-change guards: an identity provider or a file that suddenly lists nobody must not suspend or
delete everybody. One rule for the reconciler (before a plan reaches a target), the Keycloak pull and
`sup import --prune`; each answers with why it refuses, and `--force` overrides it.

The limits are the reconcile settings (`reconcile.max_deletions`, `max_suspensions`,
`max_suspension_share`); the rules read them through `MassChangeLimits`, so `settings.reconcile`
is passed as it is and the rules stay pure.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
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


def too_many_suspensions(count: int, total: int, limits: MassChangeLimits) -> bool:
    """Whether locking or removing `count` of `total` active users is over the limits."""
    limit, share = limits.max_suspensions, limits.max_suspension_share
    return count > limit or (count > MIN_USERS_FOR_SHARE and total > 0 and count / total > share)


def mass_change(baseline: Set[str], active: Set[str], limits: MassChangeLimits) -> str | None:
    """Why applying would lock or remove too many of the users a target holds active, or None.

    `baseline` is what the target was last left holding active (status rows), not the store: an
    identity provider that suddenly reports everybody gone changes the store first, and the
    reconciler is where that must stop before it reaches the cluster. `active`: the users the
    desired state keeps active.
    """
    leaving = sorted(baseline - active)
    count, total = len(leaving), len(baseline)
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


def _shown(names: Sequence[str]) -> str:
    return ", ".join(names[:SHOWN]) + (", ..." if len(names) > SHOWN else "")
