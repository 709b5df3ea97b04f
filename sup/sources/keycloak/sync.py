"""Applying what was read from Keycloak to the store, through the users and groups services.

The rules, by module:
- compare.py: what a Keycloak user says of the person (fields, `idp` SSH keys, gidNumber).
- write_users.py: users created, updated, suspended (disabled or gone) and taken over.
- write_groups.py: groups created, renamed, deleted and taken over; their member lists.
- guard.py: a full read that would suspend too many users changes nothing unless forced.
- naming.py: POSIX names of Keycloak users and groups.
Ownership: a user or group whose name is held by another source is left alone and reported as a
conflict, unless `sources.precedence` lets Keycloak take it over. The reader never hands over a partial
read. Nothing that did not change is written: a pull without changes makes zero store writes, and a
user that plainly did not change is recognised without the services (unchanged.py). New users go
in batches through the users service's batched create (create_batch.py); every other change goes
through the services' create-or-update, which validate, allocate ids, audit and mark the outbox.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from sup.config import Settings
from sup.sources.keycloak.create_batch import NewUserBatches
from sup.sources.keycloak.guard import refusal
from sup.sources.keycloak.loaded import LoadedStore, guarded, log
from sup.sources.keycloak.reader import KcUser, RealmSnapshot
from sup.sources.keycloak.report import Scope, SyncReport
from sup.sources.keycloak.unchanged import unchanged
from sup.sources.keycloak.write_groups import sync_groups, sync_members
from sup.sources.keycloak.write_users import suspend_gone, sync_user


def apply(
    session: Session,
    settings: Settings,
    snapshot: RealmSnapshot,
    *,
    scope: Scope | None = None,
    force: bool = False,
    mode: str = "full",
) -> SyncReport:
    """Make the store agree with `snapshot` (within `scope`). Returns what was done."""
    scope = scope or Scope()
    report = SyncReport(
        mode=mode,
        users_read=len(snapshot.users),
        groups_read=len(snapshot.groups),
        requests=snapshot.requests,
    )
    store = LoadedStore(session)

    refused = None if force else refusal(settings, store.user_by_kc, snapshot, scope)
    if refused is not None:
        report.refused = refused
        log.warning("keycloak sync refused: %s", report.refused)
        return report

    ordered = sorted(snapshot.users.values(), key=lambda u: u.username)

    def one(kc: KcUser) -> None:
        guarded(
            session, report, f"user {kc.username!r}", lambda: sync_user(session, settings, store, kc, report)
        )

    batches = NewUserBatches(session, settings, store, ordered, report, one)
    for kc in ordered:
        if batches.take(kc) or unchanged(settings, store, kc):
            continue
        batches.flush()  # ids are allocated in this order, batched or not
        one(kc)
    batches.flush()
    if scope.users is None:
        gone_ids = set(store.user_by_kc) - set(snapshot.users)
    else:
        gone_ids = {i for i in scope.users if i not in snapshot.users and i in store.user_by_kc}
    for kc_id in sorted(gone_ids):
        user = store.user_by_kc[kc_id]
        if user.active:
            guarded(
                session,
                report,
                f"user {user.username!r}",
                lambda u=user: suspend_gone(session, settings, u, report),
            )

    group_ids = sync_groups(session, settings, store, snapshot, scope, report)
    sync_members(session, settings, store, snapshot, scope, group_ids, report)
    for conflict in report.conflicts:
        log.warning("keycloak sync conflict: %s", conflict)
    return report
