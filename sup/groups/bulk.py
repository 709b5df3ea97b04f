"""The groups service's batched writes, for imports: many groups or memberships in a few statements.

The store's batch id allocator, multi-row inserts, one outbox upsert per kind and one audit row per
object (per group for memberships): never a query per row. The caller has checked the records
against the rules and the store first (the import plan does): these functions do not re-check names.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, insert, select, tuple_
from sqlalchemy.orm import Session

from sup.config import Settings
from sup.groups.schemas import GroupCreate
from sup.groups.upsert import GroupChange
from sup.store import ids
from sup.store.audit import Actor, member_change
from sup.store.bulk_audit import record_many
from sup.store.models import Group, Membership, User, new_scim_id, utcnow
from sup.store.outbox import mark_dirty_many


def create_groups(
    session: Session, settings: Settings, actor: Actor, specs: Sequence[GroupCreate], source: str
) -> list[GroupChange]:
    """Create ordinary groups without members (add those with `add_memberships`)."""
    supplied = [(s.gid_number, "group", s.name) for s in specs if s.gid_number is not None]
    ids.claim_many(
        session,
        "gid",
        supplied,
        accepted=[settings.ids.gid_range, *settings.ids.supplied_gid_ranges],
        field="gid_number",
    )
    auto = [s for s in specs if s.gid_number is None]
    numbers = ids.allocate_many(
        session, "gid", settings.ids.gid_range, [("group", s.name) for s in auto], field="gid_number"
    )
    gid_of = {s.name: s.gid_number for s in specs if s.gid_number is not None}
    gid_of.update({s.name: n for s, n in zip(auto, numbers, strict=True)})
    now = utcnow()
    rows: list[dict[str, Any]] = [
        {
            "name": s.name,
            "gid_number": gid_of[s.name],
            "description": s.description,
            "external_id": s.external_id,
            "source": source,
            "scim_id": new_scim_id(),
            "version": 1,
            "created_at": now,
            "updated_at": now,
        }
        for s in specs
    ]
    session.execute(insert(Group), rows)
    mark_dirty_many(session, "group", gid_of)
    record_many(session, actor, "create", "group", [(row["name"], None, _created(row)) for row in rows])
    return [GroupChange("created", s.name, frozenset(s.model_fields_set - {"members"})) for s in specs]


def _created(row: dict[str, Any]) -> dict[str, Any]:
    """The audit entry's `after` of a new group (as groups.service.snapshot shows it)."""
    return {
        "name": row["name"],
        "gid_number": row["gid_number"],
        "description": row["description"],
        "private": False,
        "external_id": row["external_id"],
        "source": row["source"],
        "version": 1,
        "members": [],
    }


def add_memberships(session: Session, actor: Actor, pairs: Sequence[tuple[str, str]], source: str) -> None:
    """Add (group, username) memberships (none of them exists yet)."""
    _memberships(session, actor, pairs, source, add=True)


def remove_memberships(session: Session, actor: Actor, pairs: Sequence[tuple[str, str]]) -> None:
    """Remove (group, username) memberships."""
    _memberships(session, actor, pairs, "", add=False)


def _memberships(
    session: Session, actor: Actor, pairs: Sequence[tuple[str, str]], source: str, *, add: bool
) -> None:
    groups = sorted({g for g, _ in pairs})
    users = sorted({u for _, u in pairs})
    group_id = dict(session.execute(select(Group.name, Group.id).where(Group.name.in_(groups))).all())
    user_id = dict(session.execute(select(User.username, User.id).where(User.username.in_(users))).all())
    keys = [(group_id[g], user_id[u]) for g, u in pairs]
    if add:
        now = utcnow()
        session.execute(
            insert(Membership),
            [{"group_id": g, "user_id": u, "source": source, "created_at": now} for g, u in keys],
        )
    else:
        for start in range(0, len(keys), 400):
            session.execute(
                delete(Membership).where(
                    tuple_(Membership.group_id, Membership.user_id).in_(keys[start : start + 400])
                )
            )
    mark_dirty_many(session, "members", groups)
    mark_dirty_many(session, "user", users)
    by_group: dict[str, list[str]] = defaultdict(list)
    for g, u in pairs:
        by_group[g].append(u)
    entries = [
        (g, None, {"members": sorted(m), **member_change((), m)})
        if add
        else (g, {"members": sorted(m)}, member_change(m, ()))
        for g, m in by_group.items()
    ]
    record_many(session, actor, "add_member" if add else "remove_member", "group", entries)
