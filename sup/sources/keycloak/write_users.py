"""Keycloak users into the store, through the users service's create-or-update.

A Keycloak user is a store user with source `keycloak` and external_id = Keycloak's user id; the POSIX
username is derived from the Keycloak username. Disabled in Keycloak -> suspended (active=false); gone
from Keycloak -> suspended too, which starts the deletion lifecycle. Disabled users never provisioned
are not created. A username held by another source is left alone and reported as a conflict, unless
`sources.precedence` lets Keycloak take it over.
"""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy.orm import Session

from sup.config import Settings
from sup.sources.keycloak.compare import user_input
from sup.sources.keycloak.loaded import LoadedStore, log
from sup.sources.keycloak.naming import ACTOR, SOURCE, username_of
from sup.sources.keycloak.reader import KcUser
from sup.sources.keycloak.report import SyncReport
from sup.store.models import User
from sup.users.upsert import UserInput, save_user, take_over_user


def sync_user(
    session: Session, settings: Settings, store: LoadedStore, kc: KcUser, report: SyncReport
) -> None:
    user = store.user_by_kc.get(kc.id)
    if user is None:
        username = username_of(settings, kc)
        holder = store.user_by_name.get(username)
        if holder is not None:
            if holder.source == SOURCE:
                report.conflicts.append(
                    f"Keycloak user {kc.username!r} gives username {username!r}, which another Keycloak "
                    f"user (id {holder.external_id}) already has; {kc.username!r} is not provisioned"
                )
                return
            if not settings.sources.may_take_over(SOURCE, holder.source):
                report.conflicts.append(
                    f"user {username!r} (Keycloak {kc.username!r}) is owned by source {holder.source!r}; "
                    "left as it is (sources.precedence does not let keycloak take it over)"
                )
                return
            take_over_user(session, ACTOR, holder, SOURCE, kc.id)
            store.user_by_kc[kc.id] = holder
            user = holder
        else:
            if not kc.enabled:
                return  # never provisioned, and disabled: nothing to do
            data = user_input(settings, kc, username, report, username, create=True)
            created, _ = save_user(session, settings, ACTOR, data, None)
            store.user_by_name[username] = created
            store.user_by_kc[kc.id] = created
            report.created.append(username)
            return
    old_name = user.username
    was_active = user.active
    data = user_input(settings, kc, user.username, report, user.username)
    data = replace(data, username=username_of(settings, kc))
    _, change = save_user(session, settings, ACTOR, data, user)
    if change.action == "unchanged":
        return
    if old_name != user.username:
        store.user_by_name.pop(old_name, None)
        store.user_by_name[user.username] = user
    if was_active and not user.active:
        report.suspended.append(user.username)
    elif not was_active and user.active:
        report.reactivated.append(user.username)
    else:
        report.updated.append(user.username)


def suspend_gone(session: Session, settings: Settings, user: User, report: SyncReport) -> None:
    data = UserInput(username=user.username, source=SOURCE, fields={"active": False})
    save_user(session, settings, ACTOR, data, user)
    report.suspended.append(user.username)
    log.info("user %s is gone from Keycloak: suspended (the deletion lifecycle starts)", user.username)
