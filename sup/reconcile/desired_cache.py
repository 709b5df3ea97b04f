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
    derive,
    derive_account,
    derive_group,
    derive_user,
)
from sup.store.snapshot import load_accounts, load_groups, load_private_groups, load_snapshot, load_users
from sup.targets.base import Scope

V = TypeVar("V")

MAX_RELOAD = 2_000  # users to reload, beyond which loading everything is about as cheap


@dataclass
class _Kept:
    """What was derived from the store as last loaded (patched since), and the little of the store
    itself a patch needs: shared groups with all their members (active or not), and who owns which
    private group. Users are not kept as loaded: a patch reloads every user it re-derives."""

    policy: Policy
    loaded_at: float  # time.monotonic() of the last full load
    shared: dict[str, StoredGroup]  # the groups that are nobody's private group
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
            shared={g.name: g for g in snapshot.groups if g.private_for is None},
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
    users = set(scope.users)
    if scope.changed_groups & kept.shared.keys():
        return None  # a shared group's own attributes changed: its members' objects list them
    fresh_users = {u.username: u for u in load_users(session, users)}
    names = set(scope.groups)  # the groups to reload: those named, and every group of the users'
    # (SUP's own writes also mark a group whose member list they change; this holds without them)
    names.update(g.name for g in kept.shared.values() if not users.isdisjoint(g.members))
    for user in fresh_users.values():
        names |= user.groups
    fresh_groups = {g.name: g for g in load_groups(session, names)}
    for group in fresh_groups.values():
        if group.private_for is None and group.name in scope.changed_groups:
            return None  # a new shared group
        if group.private_for is not None and group.private_for not in users:
            return None  # a private group changed without its user: not a write SUP makes
    shared_names = {
        name for name in names if name not in fresh_groups or fresh_groups[name].private_for is None
    }
    members = {m for name in scope.members_only if name in fresh_groups for m in fresh_groups[name].members}
    extra = members - users
    if len(extra) > MAX_RELOAD:
        return None
    fresh_users.update((u.username, u) for u in load_users(session, extra))
    reloaded = users | extra
    private = {g.private_for: g for g in load_private_groups(session, reloaded) if g.private_for}
    if scope.accounts:
        kept.stored_accounts = load_accounts(session)

    for name in reloaded:
        stored = fresh_users.get(name)
        desired_user = derive_user(stored, kept.policy) if stored is not None else None
        _put(kept.users, name, desired_user)
        if desired_user is not None and desired_user.active:
            kept.active.add(name)
        else:
            kept.active.discard(name)
    for name in reloaded:  # their private groups, which follow them (renamed, gone, unprovisioned)
        old = kept.private_of.pop(name, None)
        if old is not None:
            kept.groups.pop(old, None)
        own = private.get(name)
        if own is not None:
            kept.private_of[name] = own.name
            _put(kept.groups, own.name, derive_group(own, kept.users, kept.active))
    for name in shared_names:
        _put(kept.shared, name, fresh_groups.get(name))
        shared = kept.shared.get(name)
        _put(kept.groups, name, derive_group(shared, kept.users, kept.active) if shared else None)
    groups = dict(kept.groups)
    return DesiredState(
        users=dict(kept.users),
        groups=groups,
        accounts={a.name: derive_account(a, groups) for a in kept.stored_accounts},
        plain_keys_in_login_pods=kept.policy.plain_keys_in_login_pods,
    )


def _put(mapping: dict[str, V], name: str, value: V | None) -> None:
    if value is None:
        mapping.pop(name, None)
    else:
        mapping[name] = value
