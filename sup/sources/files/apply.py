"""Write an import plan into the store: fast, in chunks, and safe to interrupt.

Creates go through the services' batched forms (sup/users/bulk.py, sup/groups/bulk.py: the store's
batch id allocator, multi-row inserts, one outbox upsert per kind, one audit row per object), a chunk
of `CHUNK` objects per transaction: never a commit per row. An update goes through the services'
create-or-update (few in a typical import; the services own the rules of a change: renames, uid
moves, suspension). Each chunk commits what it wrote together with its outbox
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

from sqlalchemy.orm import Session

from sup.config import Settings
from sup.domain.ownership import IMPORT_SOURCE
from sup.errors import SupError
from sup.groups.bulk import add_memberships, create_groups, remove_memberships
from sup.groups.schemas import GroupCreate
from sup.groups.service import delete_group
from sup.groups.upsert import GroupInput, save_group
from sup.slurm_accounts.schemas import SlurmAccountCreate, SlurmAccountPatch
from sup.slurm_accounts.service import create_account, update_account
from sup.sources.files.document import Record
from sup.sources.files.plan import Item, Plan, user_values
from sup.store.audit import Actor
from sup.store.lookup import require_group, require_user
from sup.users.bulk import create_users
from sup.users.schemas import UserCreate
from sup.users.upsert import UserInput, save_user

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
            create_groups(session, settings, actor, [r.spec for _, r in chunk], IMPORT_SOURCE)
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
            specs = [
                r.spec.model_copy(update={"groups": sorted(joins.get(r.spec.username, []))})
                for r in user_chunk
            ]
            create_users(session, settings, actor, specs, IMPORT_SOURCE)
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
            add_memberships(session, actor, add_chunk, IMPORT_SOURCE)
        step(len(add_chunk))
    for remove_chunk in _chunks(removes):
        with transaction() as session:
            remove_memberships(session, actor, remove_chunk)
        step(len(remove_chunk))

    _one_by_one(
        transaction,
        outcome,
        step,
        [(i, None) for i in plan.prune if i.kind == "user"],
        lambda s, i, r: _suspend(s, settings, actor, i),
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


def _update_group(
    session: Session, settings: Settings, actor: Actor, item: Item, record: Record[GroupCreate]
) -> None:
    fields = {k: getattr(record.spec, k) for k in item.changes if k != "members"}
    if fields:
        data = GroupInput(item.name, IMPORT_SOURCE, fields)
        save_group(session, settings, actor, data, require_group(session, item.name))


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


def _update_user(
    session: Session, settings: Settings, actor: Actor, item: Item, record: Record[UserCreate]
) -> None:
    values = user_values(record)
    fields = {k: values[k] for k in item.changes if k in values}
    if fields:
        data = UserInput(item.name, IMPORT_SOURCE, fields)
        save_user(session, settings, actor, data, require_user(session, item.name))


def _suspend(session: Session, settings: Settings, actor: Actor, item: Item) -> None:
    data = UserInput(item.name, IMPORT_SOURCE, {"active": False})
    save_user(session, settings, actor, data, require_user(session, item.name))
