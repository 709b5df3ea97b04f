"""Running a Keycloak sync: a full pull, or an incremental one from admin events; one at a time.

A full pull reads the whole realm first (no transaction open while Keycloak answers), then applies
it in one transaction. An incremental pull reads the admin events since the cursor, re-reads only the
users and groups they name (a 404 is "gone"; any other failure aborts), and applies that. The full
pull stays the safety net: events can be switched off, expire, or be missed.

Both hold the store's named lock `source:keycloak` (an advisory lock on PostgreSQL), so two replicas or
a CLI run and the server never apply at once.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.errors import ConfigurationError, Conflict
from sup.sources.keycloak.reader import KcGroup, ReadFailed, RealmReader, RealmSnapshot, in_scope
from sup.sources.keycloak.report import Scope, SyncReport
from sup.sources.keycloak.sync import apply
from sup.store.locks import LockTimeout, exclusive
from sup.store.models import SourceState, utcnow

log = logging.getLogger(__name__)
NAME = "keycloak"
# Events are re-read from a little before the cursor: Keycloak's clock and ours may differ, and an
# event re-applied changes nothing.
EVENT_OVERLAP_MS = 5000


def _reader(settings: Settings, reader: RealmReader | None) -> RealmReader:
    if reader is not None:
        return reader
    if settings.keycloak is None:
        raise ConfigurationError("the Keycloak source is not configured (SUP_KEYCLOAK__URL, ...)")
    return RealmReader(settings.keycloak)


def _state(session: Session) -> SourceState:
    state = session.get(SourceState, NAME)
    if state is None:
        state = SourceState(name=NAME)
        session.add(state)
    return state


def _failed(sessions: sessionmaker[Session], report: SyncReport, message: str) -> SyncReport:
    report.errors.append(message)
    with sessions.begin() as session:
        state = _state(session)
        state.last_attempt_at = utcnow()
        state.last_error = message
        state.last_result = report.as_json()
    log.warning("keycloak %s sync failed: %s", report.mode, message)
    return report


def _record(session: Session, report: SyncReport, *, full: bool, cursor: int | None) -> None:
    state = _state(session)
    now = utcnow()
    state.last_attempt_at = now
    state.last_result = report.as_json()
    state.last_error = report.refused or ("; ".join(report.errors[:5]) if report.errors else None)
    if report.refused is None:
        if full:
            state.last_full_at = now
        if cursor is not None:
            state.event_cursor = cursor


def full_sync(
    settings: Settings,
    engine: Engine,
    sessions: sessionmaker[Session],
    *,
    force: bool = False,
    reader: RealmReader | None = None,
    wait: float = 60,
) -> SyncReport:
    """Read the whole realm and make the store agree. Never raises for Keycloak's failures: the
    report says what went wrong and nothing was changed."""
    if settings.keycloak is None and reader is None:
        raise ConfigurationError("the Keycloak source is not configured (SUP_KEYCLOAK__URL, ...)")
    started_ms = int(time.time() * 1000)
    try:
        with exclusive(engine, "source:keycloak", timeout=wait):
            try:
                snapshot = _reader(settings, reader).snapshot()
            except ReadFailed as exc:
                return _failed(sessions, SyncReport(mode="full"), f"reading Keycloak failed: {exc}")
            with sessions.begin() as session:
                report = apply(session, settings, snapshot, force=force, mode="full")
                _record(session, report, full=True, cursor=started_ms - EVENT_OVERLAP_MS)
    except LockTimeout as exc:
        raise Conflict(f"{exc}; another Keycloak sync is running") from exc
    log.info("keycloak full sync: %s", _summary(report))
    return report


def events_sync(
    settings: Settings,
    engine: Engine,
    sessions: sessionmaker[Session],
    *,
    reader: RealmReader | None = None,
) -> SyncReport | None:
    """Apply the admin events since the last cursor. None when there is no cursor yet (the first
    full pull sets it) or nothing happened."""
    with sessions() as session:
        state = session.get(SourceState, NAME)
        cursor = None if state is None else state.event_cursor
    if cursor is None:
        return None
    report = SyncReport(mode="events")
    try:
        with exclusive(engine, "source:keycloak", timeout=0):
            try:
                source = _reader(settings, reader)
                events = source.admin_events(cursor)
                if not events:
                    return None
                snapshot, scope = _read_named(settings, source, events)
            except ReadFailed as exc:
                return _failed(sessions, report, f"reading Keycloak failed: {exc}")
            newest = max(int(e.get("time", 0)) for e in events)
            with sessions.begin() as session:
                report = apply(session, settings, snapshot, scope=scope, mode="events")
                _record(session, report, full=False, cursor=max(cursor, newest - EVENT_OVERLAP_MS))
    except LockTimeout:
        return None  # a full pull is running; it covers these events
    if report.writes or report.errors or report.conflicts or report.refused:
        log.info("keycloak events sync (%d events): %s", len(events), _summary(report))
    return report


def _read_named(
    settings: Settings, source: RealmReader, events: list[dict[str, Any]]
) -> tuple[RealmSnapshot, Scope]:
    """Re-read what the events name: users, their group lists, and (for group events) every group."""
    user_ids: set[str] = set()
    member_users: set[str] = set()
    group_event = False
    for event in events:
        parts = str(event.get("resourcePath", "")).split("/")
        kind = event.get("resourceType")
        if kind == "USER" and len(parts) >= 2 and parts[0] == "users":
            user_ids.add(parts[1])
        elif kind == "GROUP_MEMBERSHIP" and len(parts) >= 2 and parts[0] == "users":
            user_ids.add(parts[1])
            member_users.add(parts[1])
        elif kind == "GROUP":
            group_event = True
    snapshot = RealmSnapshot()
    for user_id in sorted(user_ids):
        user = source.user(user_id)
        if user is not None:
            snapshot.users[user_id] = user
    groups: dict[str, KcGroup] = {}
    flatten = settings.keycloak is not None and settings.keycloak.flatten_subgroups
    tree_read = group_event or (flatten and bool(member_users))
    if tree_read:
        # A group created, renamed, moved or deleted: the group tree is small, read it whole (and the
        # members of every group: a new or moved group may hold anybody). With flattened subgroups a
        # membership change reaches the user's groups' parents: the tree says which they are.
        groups = source.groups()
        snapshot.groups = groups
    user_groups = {u: source.user_groups(u) for u in sorted(member_users & set(snapshot.users))}
    if group_event:
        for group_id in groups:
            snapshot.members[group_id] = source.members(group_id)
    snapshot.requests = source.requests
    scope = Scope(
        users=frozenset(user_ids),
        groups_complete=tree_read,
        member_groups=frozenset(snapshot.members),
        user_groups=user_groups,
    )
    return snapshot, scope


def _summary(report: SyncReport) -> str:
    return (
        f"{report.users_read} users, {report.groups_read} groups read; {len(report.created)} created, "
        f"{len(report.updated)} updated, {len(report.suspended)} suspended, {len(report.reactivated)} "
        f"reactivated; groups {len(report.groups_created)} created, {len(report.groups_updated)} updated, "
        f"{len(report.groups_deleted)} deleted; members +{report.members_added} -{report.members_removed}; "
        f"{len(report.conflicts)} conflicts, {len(report.errors)} errors"
        + (f"; REFUSED: {report.refused}" if report.refused else "")
    )


__all__ = ["events_sync", "full_sync", "in_scope"]
