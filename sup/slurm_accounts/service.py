"""Creating, changing and deleting the Slurm accounts SUP manages.

The accounts form a tree below Slurm's `root`: a parent is `root` or another SUP account, cycles are
refused, and an account with children cannot be deleted (Slurm would orphan them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session, selectinload

from sup.common.concurrency import check_version
from sup.domain.slurm import ROOT_ACCOUNT
from sup.errors import Conflict, FieldError, InvalidInput
from sup.slurm_accounts.schemas import SlurmAccountCreate, SlurmAccountOut, SlurmAccountPatch
from sup.store.audit import Actor, record
from sup.store.lookup import account_by_name, group_by_name, require_account
from sup.store.models import Group, SlurmAccount, User, utcnow
from sup.store.outbox import mark_dirty
from sup.store.paging import fetch_page


def to_out(account: SlurmAccount) -> SlurmAccountOut:
    return SlurmAccountOut(
        name=account.name,
        group=account.group.name if account.group is not None else None,
        coordinators=account.coordinators_group.name if account.coordinators_group is not None else None,
        parent=account.parent,
        description=account.description,
        organization=account.organization,
        fairshare=account.fairshare,
        qos=list(account.qos),
        default_qos=account.default_qos,
        partitions=list(account.partitions),
        limits=dict(account.limits),
        version=account.version,
        created_at=account.created_at,
        updated_at=account.updated_at,
    )


def snapshot(account: SlurmAccount) -> dict[str, Any]:
    return to_out(account).model_dump(mode="json")


def _group(session: Session, name: str | None, field: str = "group") -> Group | None:
    if name is None:
        return None
    group = group_by_name(session, name)
    if group is None:
        raise InvalidInput(FieldError(field, f"there is no group {name!r}"))
    return group


def _check_parent(session: Session, parent: str, child: str | None = None) -> None:
    """`parent` must be root or a SUP account, and (for an existing `child`) not below it."""
    if parent == ROOT_ACCOUNT:
        return
    seen: set[str] = set()
    current: str | None = parent
    while current is not None and current != ROOT_ACCOUNT:
        if current == child:
            raise InvalidInput(
                FieldError("parent", f"{parent!r} is below {child!r}: that would make a cycle")
            )
        if current in seen:  # pragma: no cover - the check above keeps the stored tree acyclic
            break
        seen.add(current)
        account = account_by_name(session, current)
        if account is None:
            raise InvalidInput(
                FieldError(
                    "parent", f"there is no SUP-managed account {current!r} (use 'root' or create it first)"
                )
            )
        current = account.parent


def _check_default_qos(qos: list[str], default_qos: str | None) -> None:
    if default_qos is not None and qos and default_qos not in qos:
        raise InvalidInput(FieldError("default_qos", f"{default_qos!r} is not in qos"))


def create_account(session: Session, actor: Actor, spec: SlurmAccountCreate) -> SlurmAccount:
    if account_by_name(session, spec.name) is not None:
        raise Conflict(f"a Slurm account named {spec.name!r} already exists", field="name")
    _check_parent(session, spec.parent)
    account = SlurmAccount(
        name=spec.name,
        parent=spec.parent,
        description=spec.description,
        organization=spec.organization,
        fairshare=spec.fairshare,
        qos=spec.qos,
        default_qos=spec.default_qos,
        partitions=spec.partitions,
        limits=spec.limits.model_dump(exclude_none=True),
        group=_group(session, spec.group),
        coordinators_group=_group(session, spec.coordinators, "coordinators"),
    )
    session.add(account)
    session.flush()
    mark_dirty(session, "slurm_account", account.name)
    record(session, actor, "create", "slurm_account", account.name, after=snapshot(account))
    return account


@dataclass(frozen=True)
class AccountFilter:
    parent: str | None = None
    group: str | None = None


def _conditions(flt: AccountFilter) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if flt.parent is not None:
        conditions.append(SlurmAccount.parent == flt.parent)
    if flt.group is not None:
        conditions.append(SlurmAccount.group_id.in_(select(Group.id).where(Group.name == flt.group)))
    return conditions


def list_accounts(
    session: Session, flt: AccountFilter, limit: int, offset: int
) -> tuple[list[SlurmAccount], int]:
    loaded = (selectinload(SlurmAccount.group), selectinload(SlurmAccount.coordinators_group))
    return fetch_page(
        session, SlurmAccount, _conditions(flt), SlurmAccount.name, limit, offset, options=loaded
    )


def update_account(
    session: Session, actor: Actor, name: str, patch: SlurmAccountPatch, expected_version: int | None = None
) -> SlurmAccount:
    account = require_account(session, name)
    check_version(account.version, expected_version, f"Slurm account {name!r}")
    before = snapshot(account)
    changes = patch.provided()

    new_name = changes.pop("name", None)
    if new_name is not None and new_name != account.name:
        # Slurm cannot rename an account: SUP would have to move every association. Refuse clearly.
        raise InvalidInput(
            FieldError("name", "Slurm accounts cannot be renamed; create a new account instead")
        )
    if "parent" in changes:
        _check_parent(session, changes["parent"], child=account.name)
    if "group" in changes:
        account.group = _group(session, changes.pop("group"))
    if "coordinators" in changes:
        account.coordinators_group = _group(session, changes.pop("coordinators"), "coordinators")
    if "limits" in changes:
        changes["limits"] = changes["limits"].model_dump(exclude_none=True)
    for field, value in changes.items():
        setattr(account, field, value)
    _check_default_qos(account.qos, account.default_qos)

    if snapshot(account) == before:
        return account
    account.updated_at = utcnow()
    mark_dirty(session, "slurm_account", account.name)
    session.flush()
    record(session, actor, "update", "slurm_account", account.name, before=before, after=snapshot(account))
    return account


def delete_account(session: Session, actor: Actor, name: str, expected_version: int | None = None) -> None:
    account = require_account(session, name)
    check_version(account.version, expected_version, f"Slurm account {name!r}")
    child = session.scalars(select(SlurmAccount.name).where(SlurmAccount.parent == name)).first()
    if child is not None:
        raise Conflict(f"Slurm account {name!r} has a child account {child!r}; delete or move it first")
    user = session.scalars(select(User.username).where(User.slurm_default_account == name)).first()
    if user is not None:
        raise Conflict(
            f"Slurm account {name!r} is the chosen default account of user {user!r}; change that first"
        )
    before = snapshot(account)
    mark_dirty(session, "slurm_account", name)
    session.delete(account)
    session.flush()
    record(session, actor, "delete", "slurm_account", name, before=before)
