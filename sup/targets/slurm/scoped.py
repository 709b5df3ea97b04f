"""A pass the outbox scoped to a few users (push to login): read and plan only their part of Slurm.

Reads, per cluster, the scope's users' associations and Slurm users (`where user=a,b` and
`where name=a,b`: sacctmgr 22.05 takes comma lists) and every account's own row (`where user=`
with no value: only the rows without a user, which user associations inherit from); the global
account list (coordinators) is read as a full pass reads it. The plan is the full plan's on the desired
state narrowed to the scope's users (accounts keep only them as members and coordinators), less
every change that is not one of theirs: accounts, reports about accounts and everybody else's
associations and coordinators are the full pass's. Nobody else's association is read, so nobody
else's is removed; a scope user deleted from the store loses theirs, a suspended one has them blocked
(MaxSubmitJobs=0) first, as in a full pass.

The spec does not scope a pass after an account changed (the outbox names it, Scope.accounts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sup.domain.desired import DesiredState
from sup.targets.base import Scope
from sup.targets.slurm.model import SlurmChange


def where_users(cluster: str, users: Sequence[str]) -> list[str]:
    """The `where` of the user rows of these users on a cluster; never `user=` with no value, which
    sacctmgr reads as "the rows without a user"."""
    assert users, "no user to read"
    return [f"Cluster={cluster}", "User=" + ",".join(sorted(users))]


def where_names(cluster: str, users: Sequence[str]) -> list[str]:
    """The `where` of `show user` for these users (default account on the cluster, AdminLevel)."""
    assert users, "no user to read"
    return [f"Cluster={cluster}", "Name=" + ",".join(sorted(users))]


def account_rows(cluster: str) -> list[str]:
    """The `where` of the accounts' own rows on a cluster (no user rows)."""
    return [f"Cluster={cluster}", "User="]


def narrow(desired: DesiredState, scope: Scope) -> DesiredState:
    """The desired state of the scope's users only (the groups and accounts stay whole)."""
    return replace(desired, users={n: u for n, u in desired.users.items() if n in scope.users})


def owned(changes: Sequence[SlurmChange], scope: Scope) -> list[SlurmChange]:
    """The changes that are the scope's users' own."""
    return [change for change in changes if change.subject is not None and change.subject in scope.users]
