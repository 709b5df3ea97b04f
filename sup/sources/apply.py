"""Write an import plan into the store: fast, in chunks, and safe to interrupt.

Creates go in bulk (the store's batch id allocator, multi-row inserts, one outbox upsert per kind,
one audit row per object), a chunk of `CHUNK` objects per transaction: never a commit per row. An
update goes through the service layer (few in a typical import; the services own the rules of a
change: renames, uid moves, suspension). Each chunk commits what it wrote together with its outbox
marks and audit rows, so a run killed between chunks leaves a consistent store, and the next run's
plan (computed from the store) does only what is left: no duplicates.

Order: groups, Slurm accounts (they name groups), users with their memberships (they name groups and
default accounts), then the remaining membership changes, then pruning.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import delete, insert, select, tuple_
from sqlalchemy.orm import Session

from sup.config import Settings
from sup.domain.sshkeys import parse_ssh_public_key
from sup.errors import SupError
from sup.groups.schemas import GroupCreate, GroupPatch
from sup.groups.service import delete_group, update_group
from sup.slurm_accounts.schemas import SlurmAccountCreate, SlurmAccountPatch
from sup.slurm_accounts.service import create_account, update_account
from sup.sources.document import Record
from sup.sources.ownership import IMPORT_SOURCE
from sup.sources.plan import Item, Plan, user_values
from sup.store import ids
from sup.store.audit import Actor
from sup.store.models import AuditEntry, Group, Membership, SshKey, User, new_scim_id, utcnow
from sup.store.outbox import mark_dirty_many
from sup.users.schemas import UserCreate, UserPatch
from sup.users.service import _uid_ranges, create_user, default_home, private_gid_ranges, update_user

CHUNK = 1000
T = TypeVar("T")
Progress = Callable[[int], None]
Sessions = Callable[[], AbstractContextManager[Session]]


@dataclass
class Outcome:
    errors: list[tuple[Item, str]] = field(default_factory=list)


def _chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def apply_plan(
    plan: Plan, settings: Settings, actor: Actor, transaction: Sessions, progress: Progress | None = None
) -> Outcome:
    """Apply `plan`; `transaction()` opens one transaction per chunk (committed when it exits)."""
    step = progress or (lambda n: None)
    outcome = Outcome()

    new_groups = [(i, r) for i, r in plan.groups if i.action == "create"]
    for chunk in _chunks(new_groups):
        with transaction() as session:
            _create_groups(session, settings, actor, [r for _, r in chunk])
        step(len(chunk))
    _one_by_one(
        transaction,
        outcome,
        step,
        [(i, r) for i, r in plan.groups if i.action == "update"],
        lambda s, i, r: _update_group(s, settings, actor, i, r),
    )

    accounts = _parents_first([(i, r) for i, r in plan.accounts if i.action != "unchanged"])
    _one_by_one(transaction, outcome, step, accounts, lambda s, i, r: _write_account(s, actor, i, r))

    joins: dict[str, list[str]] = defaultdict(list)
    for group, username in plan.add_members:
        joins[username].append(group)
    new_users = [r for i, r in plan.users if i.action == "create"]
    for user_chunk in _chunks(new_users):
        with transaction() as session:
            _create_users(session, settings, actor, user_chunk, joins)
        step(len(user_chunk))
    _one_by_one(
        transaction,
        outcome,
        step,
        [(i, r) for i, r in plan.users if i.action == "update"],
        lambda s, i, r: _update_user(s, settings, actor, i, r),
    )

    created = {r.spec.username for r in new_users}
    adds = sorted(p for p in plan.add_members if p[1] not in created)
    removes = sorted(plan.remove_members)
    for add_chunk in _chunks(adds):
        with transaction() as session:
            _memberships(session, actor, add_chunk, add=True)
        step(len(add_chunk))
    for remove_chunk in _chunks(removes):
        with transaction() as session:
            _memberships(session, actor, remove_chunk, add=False)
        step(len(remove_chunk))

    _one_by_one(
        transaction,
        outcome,
        step,
        [(i, None) for i in plan.prune if i.kind == "user"],
        lambda s, i, r: update_user(s, settings, actor, i.name, UserPatch(active=False)),
    )
    _one_by_one(
        transaction,
        outcome,
        step,
        [(i, None) for i in plan.prune if i.kind == "group"],
        lambda s, i, r: delete_group(s, settings, actor, i.name),
    )
    return outcome


def _one_by_one(
    transaction: Sessions,
    outcome: Outcome,
    step: Progress,
    items: list[tuple[Item, Any]],
    write: Callable[[Session, Item, Any], Any],
) -> None:
    """Writes through the services, a chunk per transaction; a write the service refuses is an
    error of that object (rolled back to its savepoint), the others go on."""
    for chunk in _chunks(items):
        with transaction() as session:
            for item, record in chunk:
                try:
                    with session.begin_nested():
                        write(session, item, record)
                except SupError as exc:
                    outcome.errors.append((item, exc.message))
        step(len(chunk))


# --- groups ------------------------------------------------------------------------------------------


def _create_groups(
    session: Session, settings: Settings, actor: Actor, records: list[Record[GroupCreate]]
) -> None:
    supplied = [(r.spec.gid_number, "group", r.spec.name) for r in records if r.spec.gid_number is not None]
    ids.claim_many(
        session,
        "gid",
        supplied,
        accepted=[settings.ids.gid_range, *settings.ids.supplied_gid_ranges],
        field="gid_number",
    )
    auto = [r for r in records if r.spec.gid_number is None]
    numbers = ids.allocate_many(
        session, "gid", settings.ids.gid_range, [("group", r.spec.name) for r in auto], field="gid_number"
    )
    gid_of = {r.spec.name: r.spec.gid_number for r in records if r.spec.gid_number is not None}
    gid_of.update({r.spec.name: n for r, n in zip(auto, numbers, strict=True)})
    now = utcnow()
    rows: list[dict[str, Any]] = [
        {
            "name": r.spec.name,
            "gid_number": gid_of[r.spec.name],
            "description": r.spec.description,
            "external_id": r.spec.external_id,
            "source": IMPORT_SOURCE,
            "scim_id": new_scim_id(),
            "version": 1,
            "created_at": now,
            "updated_at": now,
        }
        for r in records
    ]
    session.execute(insert(Group), rows)
    mark_dirty_many(session, "group", gid_of)
    _audit(session, actor, "group", [(row["name"], {**_group_json(row), "members": []}) for row in rows])


def _group_json(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": row["name"],
        "gid_number": row["gid_number"],
        "description": row["description"],
        "private": False,
        "external_id": row["external_id"],
        "source": row["source"],
        "version": 1,
    }


def _update_group(
    session: Session, settings: Settings, actor: Actor, item: Item, record: Record[GroupCreate]
) -> None:
    fields = {k: getattr(record.spec, k) for k in item.changes if k != "members"}
    if fields:
        update_group(session, settings, actor, item.name, GroupPatch.model_validate(fields))


# --- Slurm accounts ----------------------------------------------------------------------------------


def _parents_first(
    items: list[tuple[Item, Record[SlurmAccountCreate]]],
) -> list[tuple[Item, Record[SlurmAccountCreate]]]:
    names = {r.spec.name for _, r in items}
    done: set[str] = set()
    ordered: list[tuple[Item, Record[SlurmAccountCreate]]] = []
    pending = list(items)
    while pending:
        ready = [(i, r) for i, r in pending if r.spec.parent not in names or r.spec.parent in done]
        if not ready:  # a cycle: the plan refuses those, so this is only a guard
            ready = pending
        ordered += ready
        done |= {r.spec.name for _, r in ready}
        pending = [p for p in pending if p not in ready]
    return ordered


def _write_account(session: Session, actor: Actor, item: Item, record: Record[SlurmAccountCreate]) -> None:
    if item.action == "create":
        create_account(session, actor, record.spec)
        return
    fields = {k: getattr(record.spec, k) for k in item.changes}
    if "limits" in fields:
        fields["limits"] = record.spec.limits.model_dump(exclude_none=True)
    update_account(session, actor, item.name, SlurmAccountPatch.model_validate(fields))


# --- users -------------------------------------------------------------------------------------------


def _create_users(
    session: Session,
    settings: Settings,
    actor: Actor,
    records: Sequence[Record[UserCreate]],
    joins: dict[str, list[str]],
) -> None:
    if not settings.ids.private_groups:  # rare: keep the service's rules for primary groups
        for record in records:
            spec = record.spec.model_copy(update={"groups": sorted(joins.get(record.spec.username, []))})
            create_user(session, settings, actor, spec, IMPORT_SOURCE)
        return
    uid_of = _uids(session, settings, records)
    gid_of = _private_gids(session, settings, records, uid_of)
    now = utcnow()
    rows: list[dict[str, Any]] = []
    for record in records:
        spec = record.spec
        rows.append(
            {
                "username": spec.username,
                "display_name": spec.display_name,
                "given_name": spec.given_name,
                "family_name": spec.family_name,
                "email": spec.email,
                "uid_number": uid_of[spec.username],
                "primary_gid": gid_of[spec.username],
                "login_shell": spec.login_shell or settings.accounts.default_shell,
                "home_directory": spec.home_directory or default_home(settings, spec.username),
                "active": spec.active,
                "suspended_at": None if spec.active else now,
                "external_id": spec.external_id,
                "slurm_default_account": spec.slurm_default_account,
                "source": IMPORT_SOURCE,
                "scim_id": new_scim_id(),
                "version": 1,
                "created_at": now,
                "updated_at": now,
            }
        )
    user_id = {
        name: uid for uid, name in session.execute(insert(User).returning(User.id, User.username), rows).all()
    }
    session.execute(
        insert(Group),
        [
            {
                "name": name,
                "gid_number": gid_of[name],
                "private_user_id": user_id[name],
                "source": IMPORT_SOURCE,
                "scim_id": new_scim_id(),
                "version": 1,
                "created_at": now,
                "updated_at": now,
            }
            for name in user_id
        ],
    )
    keys = [
        {
            "user_id": user_id[r.spec.username],
            "key_type": key.key_type,
            "key_data": key.blob,
            "comment": key.comment,
            "fingerprint": key.fingerprint,
            "origin": "admin",
            "created_at": now,
        }
        for r in records
        for key in (parse_ssh_public_key(line) for line in r.spec.ssh_public_keys)
    ]
    if keys:
        session.execute(insert(SshKey), keys)
    joined = {name: sorted(joins.get(name, [])) for name in user_id}
    wanted_groups = sorted({g for groups in joined.values() for g in groups})
    group_id = dict(session.execute(select(Group.name, Group.id).where(Group.name.in_(wanted_groups))).all())
    links = [
        {"group_id": group_id[g], "user_id": user_id[name], "source": IMPORT_SOURCE, "created_at": now}
        for name, groups in joined.items()
        for g in groups
    ]
    if links:
        session.execute(insert(Membership), links)
    mark_dirty_many(session, "user", user_id)
    mark_dirty_many(session, "group", [*user_id, *wanted_groups])
    lines = {r.spec.username: [parse_ssh_public_key(k).line for k in r.spec.ssh_public_keys] for r in records}
    _audit(
        session,
        actor,
        "user",
        [
            (
                row["username"],
                {
                    **{k: row[k] for k in _USER_AUDIT_FIELDS},
                    "ssh_public_keys": lines[row["username"]],
                    "groups": joined[row["username"]],
                    "version": 1,
                },
            )
            for row in rows
        ],
    )


_USER_AUDIT_FIELDS = (
    "username",
    "uid_number",
    "primary_gid",
    "display_name",
    "given_name",
    "family_name",
    "email",
    "login_shell",
    "home_directory",
    "active",
    "external_id",
    "slurm_default_account",
    "source",
)


def _uids(session: Session, settings: Settings, records: Sequence[Record[UserCreate]]) -> dict[str, int]:
    supplied = [
        (r.spec.uid_number, "user", r.spec.username) for r in records if r.spec.uid_number is not None
    ]
    ids.claim_many(session, "uid", supplied, accepted=_uid_ranges(settings), field="uid_number")
    auto = [r.spec.username for r in records if r.spec.uid_number is None]
    numbers = ids.allocate_many(
        session, "uid", settings.ids.uid_range, [("user", n) for n in auto], field="uid_number"
    )
    uid_of = {owner: number for number, _, owner in supplied}
    uid_of.update(zip(auto, numbers, strict=True))
    return uid_of


def _private_gids(
    session: Session, settings: Settings, records: Sequence[Record[UserCreate]], uid_of: dict[str, int]
) -> dict[str, int]:
    """As the users service does: a supplied primary_gid, else gid = uid when that gid is free (with
    private_gid=same_as_uid), else the next free gid."""
    claims = [
        (r.spec.primary_gid, "group", r.spec.username) for r in records if r.spec.primary_gid is not None
    ]
    rest = [r.spec.username for r in records if r.spec.primary_gid is None]
    auto: list[str] = rest
    if settings.ids.private_gid == "same_as_uid":
        busy = ids.taken(session, "gid", (uid_of[n] for n in rest))
        claims += [(uid_of[n], "group", n) for n in rest if uid_of[n] not in busy]
        auto = [n for n in rest if uid_of[n] in busy]
    ids.claim_many(session, "gid", claims, accepted=private_gid_ranges(settings), field="primary_gid")
    numbers = ids.allocate_many(
        session, "gid", settings.ids.gid_range, [("group", n) for n in auto], field="primary_gid"
    )
    gid_of = {owner: number for number, _, owner in claims}
    gid_of.update(zip(auto, numbers, strict=True))
    return gid_of


def _update_user(
    session: Session, settings: Settings, actor: Actor, item: Item, record: Record[UserCreate]
) -> None:
    values = user_values(record)
    fields = {k: values[k] for k in item.changes if k in values}
    if fields:
        update_user(session, settings, actor, item.name, UserPatch.model_validate(fields))


# --- memberships -------------------------------------------------------------------------------------


def _memberships(session: Session, actor: Actor, pairs: Sequence[tuple[str, str]], *, add: bool) -> None:
    groups = sorted({g for g, _ in pairs})
    users = sorted({u for _, u in pairs})
    group_id = dict(session.execute(select(Group.name, Group.id).where(Group.name.in_(groups))).all())
    user_id = dict(session.execute(select(User.username, User.id).where(User.username.in_(users))).all())
    keys = [(group_id[g], user_id[u]) for g, u in pairs]
    if add:
        now = utcnow()
        session.execute(
            insert(Membership),
            [{"group_id": g, "user_id": u, "source": IMPORT_SOURCE, "created_at": now} for g, u in keys],
        )
    else:
        for start in range(0, len(keys), 400):
            session.execute(
                delete(Membership).where(
                    tuple_(Membership.group_id, Membership.user_id).in_(keys[start : start + 400])
                )
            )
    mark_dirty_many(session, "group", groups)
    mark_dirty_many(session, "user", users)
    by_group: dict[str, list[str]] = defaultdict(list)
    for g, u in pairs:
        by_group[g].append(u)
    action = "add_member" if add else "remove_member"
    session.execute(
        insert(AuditEntry),
        [
            {
                "actor": actor.name,
                "action": action,
                "resource_type": "group",
                "resource_name": g,
                "before": None if add else {"members": sorted(members)},
                "after": {"members": sorted(members)} if add else None,
                "request_id": actor.request_id,
                "at": utcnow(),
            }
            for g, members in by_group.items()
        ],
    )


def _audit(session: Session, actor: Actor, kind: str, objects: list[tuple[str, dict[str, Any]]]) -> None:
    now = utcnow()
    session.execute(
        insert(AuditEntry),
        [
            {
                "actor": actor.name,
                "action": "create",
                "resource_type": kind,
                "resource_name": name,
                "before": None,
                "after": after,
                "request_id": actor.request_id,
                "at": now,
            }
            for name, after in objects
        ],
    )
