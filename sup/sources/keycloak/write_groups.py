"""Keycloak groups and their members into the store, through the groups service's create-or-update.

A Keycloak group (at or below keycloak.groups_path) is a store group with source `keycloak`, named by
keycloak.group_names; its members are exactly its direct members in Keycloak that SUP holds as
Keycloak users (with keycloak.flatten_subgroups, its subgroups' members too: nesting.py). A group
gone from Keycloak is deleted (unless bound to a Slurm account: reported). A name held by another
source is left alone and reported, unless `sources.precedence` lets Keycloak take it over.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from sup.config import Settings
from sup.groups import service as groups
from sup.groups.upsert import GroupInput, save_group, take_over_group
from sup.sources.keycloak.loaded import LoadedStore, guarded
from sup.sources.keycloak.naming import ACTOR, SOURCE, group_name_of
from sup.sources.keycloak.nesting import effective_members, effective_user_groups
from sup.sources.keycloak.reader import KcGroup, RealmSnapshot
from sup.sources.keycloak.report import Scope, SyncReport
from sup.store.models import Group, User


def sync_groups(
    session: Session,
    settings: Settings,
    store: LoadedStore,
    snapshot: RealmSnapshot,
    scope: Scope,
    report: SyncReport,
) -> dict[str, Group]:
    """Create, rename and delete Keycloak groups. Returns Keycloak group id -> store group."""
    mapped: dict[str, Group] = {}
    for kc in sorted(snapshot.groups.values(), key=lambda g: g.path):

        def one(kc: KcGroup = kc) -> None:
            group = _sync_group(session, settings, store, kc, report)
            if group is not None:
                mapped[kc.id] = group

        guarded(session, report, f"group {kc.path!r}", one)
    gone = set(store.group_by_kc) - set(snapshot.groups) if scope.groups_complete else set()
    for kc_id in sorted(gone):
        group = store.group_by_kc[kc_id]

        def drop(group: Group = group) -> None:
            name = group.name
            groups.delete_group(session, settings, ACTOR, name)
            store.group_by_name.pop(name, None)
            report.groups_deleted.append(name)

        guarded(session, report, f"group {group.name!r}", drop)
    for kc_id, group in store.group_by_kc.items():
        if kc_id not in mapped and kc_id not in gone:
            mapped[kc_id] = group
    return mapped


def _sync_group(
    session: Session, settings: Settings, store: LoadedStore, kc: KcGroup, report: SyncReport
) -> Group | None:
    name = group_name_of(settings, kc)
    description = f"Keycloak group {kc.path}"[:1024]
    group = store.group_by_kc.get(kc.id)
    if group is None:
        holder = store.group_by_name.get(name)
        if holder is not None:
            if holder.source == SOURCE or holder.private_user_id is not None:
                whose = (
                    "a user's private group"
                    if holder.private_user_id is not None
                    else "another Keycloak group"
                )
                report.conflicts.append(
                    f"Keycloak group {kc.path!r} gives name {name!r}, already {whose}; skipped"
                )
                return None
            if not settings.sources.may_take_over(SOURCE, holder.source):
                report.conflicts.append(
                    f"group {name!r} (Keycloak {kc.path!r}) is owned by source {holder.source!r}; left as it "
                    "is (sources.precedence does not let keycloak take it over)"
                )
                return None
            take_over_group(session, ACTOR, holder, SOURCE, kc.id)
            store.group_by_kc[kc.id] = holder
            group = holder
        else:
            data = GroupInput(name, SOURCE, {"description": description, "external_id": kc.id})
            group, _ = save_group(session, settings, ACTOR, data, None)
            store.group_by_name[name] = group
            store.group_by_kc[kc.id] = group
            report.groups_created.append(name)
            return group
    old = group.name
    _, change = save_group(
        session, settings, ACTOR, GroupInput(name, SOURCE, {"description": description}), group
    )
    if change.action != "unchanged":
        store.group_by_name.pop(old, None)
        store.group_by_name[group.name] = group
        report.groups_updated.append(group.name)
    return group


def sync_members(
    session: Session,
    settings: Settings,
    store: LoadedStore,
    snapshot: RealmSnapshot,
    scope: Scope,
    mapped: dict[str, Group],
    report: SyncReport,
) -> None:
    store_id = {kc_id: u.id for kc_id, u in store.user_by_kc.items()}
    by_id = {u.id: u for u in store.user_by_kc.values()}
    wanted: dict[str, set[int]] = {}
    checked: dict[str, set[int] | None] = {}  # group -> the users whose membership was read (None: all)
    members_read, user_groups = snapshot.members, scope.user_groups
    if settings.keycloak is not None and settings.keycloak.flatten_subgroups:
        members_read = effective_members(snapshot, snapshot.groups, report)
        user_groups = effective_user_groups(scope, snapshot.groups, report)
    groups_read = members_read if scope.member_groups is None else {
        g: m for g, m in members_read.items() if g in scope.member_groups
    }  # fmt: skip
    for kc_gid, kc_members in groups_read.items():
        wanted[kc_gid] = {store_id[m] for m in kc_members if m in store_id}
        checked[kc_gid] = None
    for kc_uid, kc_gids in (user_groups or {}).items():
        if kc_uid not in store_id:
            continue
        for kc_gid in mapped:
            if checked.get(kc_gid, set()) is None:
                continue  # its whole member list was read
            if kc_gid in kc_gids:
                wanted.setdefault(kc_gid, set()).add(store_id[kc_uid])
            checked.setdefault(kc_gid, set()).add(store_id[kc_uid])  # type: ignore[union-attr]
    for kc_gid in set(wanted) | set(checked):
        group = mapped.get(kc_gid)
        if group is None or group.source != SOURCE:
            continue
        members = wanted.get(kc_gid, set())
        current = {m.user_id for m in group.memberships}
        within = checked.get(kc_gid)
        add = members - current
        remove = {u for u in current - members if within is None or u in within}
        _apply_members(session, settings, group, add, remove, by_id, report)


def _apply_members(
    session: Session,
    settings: Settings,
    group: Group,
    add: set[int],
    remove: set[int],
    by_id: dict[int, User],
    report: SyncReport,
) -> None:
    """One member-list change per group (one audit entry and version bump, however many members)."""
    if not add and not remove:
        return
    names = {m.user.username for m in group.memberships if m.user_id not in remove}
    names |= {by_id[u].username for u in add if u in by_id}
    members: dict[str, Any] = {"members": sorted(names)}

    def change() -> None:
        save_group(session, settings, ACTOR, GroupInput(group.name, SOURCE, members), group)
        report.members_added += len(add)
        report.members_removed += len(remove)

    guarded(session, report, f"members of {group.name!r}", change)
