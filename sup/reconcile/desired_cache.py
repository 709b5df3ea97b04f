"""The desired state kept between passes, so that a pass scoped to a few people loads only them.

A pass after writes reads and plans only the people the outbox named (planner.Scope), but it needed
the whole desired state: loading and deriving every user, group and account took 0.5 s of a
push-to-login at 10,000 people and 3 s at 50,000 (issue 27). The reconciler keeps what its last pass
derived and, for a scoped pass, reloads from the store only what the scope can have changed:

- the scope's users (their rows, keys and groups), and every member of a group whose member list
  changed (a `members` mark), so that the member list a target writes is derived from members' current
  activity even if another process's pass cleared some of their marks;
- the groups the scope names, and every group those users were or now are in;
- every Slurm account (a few hundred at most), when the scope names one;

and re-derives those users, their private groups, those groups and every account with the functions a
full derivation uses (sup.domain.desired), so the objects a scoped pass plans are exactly what a full
load would give (tests/store/test_desired_cache.py compares the two after every kind of write).

It loads everything instead (returns None from `scoped`) when nothing is kept, when the policy
changed, when what is kept is older than `max_age` (the scheduled full pass renews it sooner), when a
group's own attributes changed (a `group` mark on anything but a scoped user's private group: a
renamed or renumbered group changes what its members' objects list, and is rare), and when the reload
would be as large as a full load. The reconciler drops it when it takes the lead: another replica's
passes may have cleared marks meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy.orm import Session

from sup.domain.desired import (
    DesiredGroup,
    DesiredState,
    DesiredUser,
    Policy,
    StoredAccount,
    StoredGroup,
    StoredUser,
    derive,
    derive_account,
    derive_group,
    derive_user,
)
from sup.store.snapshot import load_accounts, load_groups, load_snapshot, load_users
from sup.targets.base import Scope

V = TypeVar("V")

MAX_RELOAD = 2_000  # users to reload, beyond which loading everything is about as cheap


@dataclass
class _Kept:
    """The store as last loaded (patched since), and what was derived from it."""

    policy: Policy
    loaded_at: float  # time.monotonic() of the last full load
    stored_users: dict[str, StoredUser]
    stored_groups: dict[str, StoredGroup]
    private_of: dict[str, str]  # username -> their private group's name
    stored_accounts: tuple[StoredAccount, ...]
    users: dict[str, DesiredUser]
    active: set[str]
    groups: dict[str, DesiredGroup]


class DesiredCache:
    """One reconciler's kept desired state (see the module's docstring). Thread-safe."""

    def __init__(self, max_age: float) -> None:
        self.max_age = max_age
        self._kept: _Kept | None = None
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._kept = None

    def full(self, session: Session, policy: Policy) -> DesiredState:
        """Load and derive the whole store, and keep it."""
        snapshot = load_snapshot(session)
        desired = derive(snapshot, policy)
        kept = _Kept(
            policy=policy,
            loaded_at=time.monotonic(),
            stored_users={u.username: u for u in snapshot.users},
            stored_groups={g.name: g for g in snapshot.groups},
            private_of={g.private_for: g.name for g in snapshot.groups if g.private_for is not None},
            stored_accounts=snapshot.accounts,
            users=dict(desired.users),
            active={name for name, user in desired.users.items() if user.active},
            groups=dict(desired.groups),
        )
        with self._lock:
            self._kept = kept
        return desired

    def scoped(self, session: Session, policy: Policy, scope: Scope) -> DesiredState | None:
        """The desired state with what `scope` can have changed reloaded, or None: load it all."""
        with self._lock:
            kept = self._kept
            if kept is None or kept.policy != policy or time.monotonic() - kept.loaded_at > self.max_age:
                return None
            try:
                desired = _patch(session, kept, scope)
            except BaseException:
                self._kept = None  # half patched: nothing kept can be trusted
                raise
            if desired is None:
                self._kept = None
            return desired


def _patch(session: Session, kept: _Kept, scope: Scope) -> DesiredState | None:
    if not all(_private_of_scoped(kept, scope.users, name) for name in scope.changed_groups):
        return None
    fresh_users = {u.username: u for u in load_users(session, scope.users)}
    group_names = set(scope.groups)
    for name in scope.users:
        for stored in (kept.stored_users.get(name), fresh_users.get(name)):
            if stored is not None:
                group_names |= stored.groups
        group_names.add(kept.private_of.get(name, name))  # a new user's private group has their name
    fresh_groups = {g.name: g for g in load_groups(session, group_names)}
    for name in scope.changed_groups:  # a private group that appeared: its user must be in scope
        group = fresh_groups.get(name)
        if group is not None and group.private_for not in scope.users:
            return None
    members = {m for name in scope.members_only if name in fresh_groups for m in fresh_groups[name].members}
    extra = members - set(scope.users)
    if len(extra) > MAX_RELOAD:
        return None
    fresh_users.update((u.username, u) for u in load_users(session, extra))
    if scope.accounts:
        kept.stored_accounts = load_accounts(session)

    reloaded_users = set(scope.users) | extra
    for name in reloaded_users:
        _put(kept.stored_users, name, fresh_users.get(name))
    for name in group_names:
        group = fresh_groups.get(name)
        old = kept.stored_groups.get(name)
        if old is not None and old.private_for is not None and kept.private_of.get(old.private_for) == name:
            del kept.private_of[old.private_for]
        _put(kept.stored_groups, name, group)
        if group is not None and group.private_for is not None:
            kept.private_of[group.private_for] = name

    for name in reloaded_users:
        stored = kept.stored_users.get(name)
        desired_user = derive_user(stored, kept.policy) if stored is not None else None
        _put(kept.users, name, desired_user)
        if desired_user is not None and desired_user.active:
            kept.active.add(name)
        else:
            kept.active.discard(name)
    regroup = group_names | {kept.private_of[name] for name in reloaded_users if name in kept.private_of}
    for name in regroup:
        stored_group = kept.stored_groups.get(name)
        derived = derive_group(stored_group, kept.users, kept.active) if stored_group is not None else None
        _put(kept.groups, name, derived)
    groups = dict(kept.groups)
    return DesiredState(
        users=dict(kept.users),
        groups=groups,
        accounts={a.name: derive_account(a, groups) for a in kept.stored_accounts},
        plain_keys_in_login_pods=kept.policy.plain_keys_in_login_pods,
    )


def _private_of_scoped(kept: _Kept, users: Collection[str], group: str) -> bool:
    """Whether `group` is (or, new, will be) the private group of one of `users`."""
    known = kept.stored_groups.get(group)
    if known is not None:
        return known.private_for is not None and known.private_for in users
    return group in users  # checked again once loaded: it must be that user's private group


def _put(mapping: dict[str, V], name: str, value: V | None) -> None:
    if value is None:
        mapping.pop(name, None)
    else:
        mapping[name] = value
