"""uid and gid allocation: the one place numbers are handed out.

Rules (docs/features.md, "uid/gid allocation", says why they are these):
- A number supplied by a source is honoured when it lies in policy (the allocation range or a
  configured `supplied_*_ranges`) and was never allocated before.
- Otherwise the lowest free number at or above the kind's counter, within the range, is taken.
- A number is never reused: allocations are never deleted, only marked released (tombstones).
- Allocations of a kind are serialized by locking that kind's counter row for the rest of the
  transaction (SELECT ... FOR UPDATE on PostgreSQL; SQLite's BEGIN IMMEDIATE already serializes), and
  the (kind, number) primary key is the backstop: two transactions can never commit the same number.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from sup.domain.ids import FORBIDDEN_IDS, IdRange
from sup.errors import Conflict, FieldError, InvalidInput
from sup.store.models import IdAllocation, IdCounter, utcnow

Kind = Literal["uid", "gid"]
_WINDOW = 256


def _lock_counter(session: Session, kind: Kind) -> IdCounter:
    counter = session.execute(
        select(IdCounter).where(IdCounter.kind == kind).with_for_update()
    ).scalar_one_or_none()
    if counter is None:  # created by the first migration; recreated if someone deleted it
        counter = IdCounter(kind=kind, next_number=0)
        session.add(counter)
        session.flush()
    return counter


def _describe(existing: IdAllocation) -> str:
    if existing.released_at is None:
        return f"is in use by {existing.owner_kind} {existing.owner_name!r}"
    return (
        f"belonged to {existing.owner_kind} {existing.owner_name!r} (released "
        f"{existing.released_at:%Y-%m-%d}) and numbers are never reused"
    )


def claim(
    session: Session,
    kind: Kind,
    number: int,
    *,
    owner_kind: str,
    owner_name: str,
    accepted: Iterable[IdRange],
    field: str,
) -> int:
    """Take a number a source supplied, or raise InvalidInput (out of policy) / Conflict (taken)."""
    ranges = list(accepted)
    if number in FORBIDDEN_IDS:
        raise InvalidInput(FieldError(field, f"{number} is a system id and cannot be assigned"))
    if not any(number in r for r in ranges):
        allowed = ", ".join(str(r) for r in ranges)
        raise InvalidInput(FieldError(field, f"{number} is outside the allowed ranges ({allowed})"))
    _lock_counter(session, kind)
    existing = session.get(IdAllocation, (kind, number))
    if existing is not None:
        raise Conflict(f"{field} {number} {_describe(existing)}", field=field)
    session.add(IdAllocation(kind=kind, number=number, owner_kind=owner_kind, owner_name=owner_name))
    session.flush()
    return number


def is_free(session: Session, kind: Kind, number: int) -> bool:
    return number not in FORBIDDEN_IDS and session.get(IdAllocation, (kind, number)) is None


def allocate(
    session: Session, kind: Kind, id_range: IdRange, *, owner_kind: str, owner_name: str, field: str
) -> int:
    """Hand out the lowest never-used number in `id_range` at or after the counter."""
    counter = _lock_counter(session, kind)
    candidate = counter.next_number if counter.next_number in id_range else id_range.min
    while candidate <= id_range.max:
        end = min(candidate + _WINDOW - 1, id_range.max)
        taken = set(
            session.scalars(
                select(IdAllocation.number).where(
                    IdAllocation.kind == kind, IdAllocation.number.between(candidate, end)
                )
            )
        )
        for number in range(candidate, end + 1):
            if number not in taken and number not in FORBIDDEN_IDS:
                session.add(
                    IdAllocation(kind=kind, number=number, owner_kind=owner_kind, owner_name=owner_name)
                )
                counter.next_number = number + 1
                session.flush()
                return number
        candidate = end + 1
    raise Conflict(f"no free {kind} left in range {id_range}; widen ids.{kind}_range", field=field)


def release(session: Session, kind: Kind, number: int) -> None:
    """Mark a number released. It stays allocated forever, so nobody else will get it."""
    allocation = session.get(IdAllocation, (kind, number))
    if allocation is not None and allocation.released_at is None:
        allocation.released_at = utcnow()


def rename_owner(session: Session, kind: Kind, number: int, owner_name: str) -> None:
    allocation = session.get(IdAllocation, (kind, number))
    if allocation is not None:
        allocation.owner_name = owner_name


# --- in batch (bulk import): the same rules, a few statements for many numbers ------------------------


def taken(session: Session, kind: Kind, numbers: Iterable[int]) -> set[int]:
    """Which of `numbers` were ever allocated (in use or tombstoned), or are system ids."""
    wanted = sorted(set(numbers))
    found = {n for n in wanted if n in FORBIDDEN_IDS}
    for start in range(0, len(wanted), 500):
        found |= set(
            session.scalars(
                select(IdAllocation.number).where(
                    IdAllocation.kind == kind, IdAllocation.number.in_(wanted[start : start + 500])
                )
            )
        )
    return found


def claim_many(
    session: Session,
    kind: Kind,
    claims: list[tuple[int, str, str]],
    *,
    accepted: Iterable[IdRange],
    field: str,
) -> None:
    """Take supplied numbers (number, owner_kind, owner_name) as `claim` does, all or none."""
    ranges = list(accepted)
    for number, _, owner in claims:
        if number in FORBIDDEN_IDS or not any(number in r for r in ranges):
            allowed = ", ".join(str(r) for r in ranges)
            raise InvalidInput(
                FieldError(field, f"{owner}: {number} is outside the allowed ranges ({allowed})")
            )
    if not claims:
        return
    _lock_counter(session, kind)
    clash = taken(session, kind, (n for n, _, _ in claims))
    if clash:
        number = min(clash)
        existing = session.get(IdAllocation, (kind, number))
        described = _describe(existing) if existing is not None else "is a system id"
        raise Conflict(f"{field} {number} {described}", field=field)
    _insert(session, kind, claims)


def allocate_many(
    session: Session, kind: Kind, id_range: IdRange, owners: list[tuple[str, str]], *, field: str
) -> list[int]:
    """`allocate` for many owners (owner_kind, owner_name) at once: the lowest never-used numbers."""
    if not owners:
        return []
    counter = _lock_counter(session, kind)
    candidate = counter.next_number if counter.next_number in id_range else id_range.min
    numbers: list[int] = []
    while len(numbers) < len(owners) and candidate <= id_range.max:
        end = min(candidate + max(_WINDOW, 2 * (len(owners) - len(numbers))) - 1, id_range.max)
        used = set(
            session.scalars(
                select(IdAllocation.number).where(
                    IdAllocation.kind == kind, IdAllocation.number.between(candidate, end)
                )
            )
        )
        for number in range(candidate, end + 1):
            if number not in used and number not in FORBIDDEN_IDS:
                numbers.append(number)
                if len(numbers) == len(owners):
                    break
        candidate = end + 1
    if len(numbers) < len(owners):
        raise Conflict(f"no free {kind} left in range {id_range}; widen ids.{kind}_range", field=field)
    _insert(session, kind, [(n, ok, on) for n, (ok, on) in zip(numbers, owners, strict=True)])
    counter.next_number = numbers[-1] + 1
    session.flush()
    return numbers


def _insert(session: Session, kind: Kind, rows: list[tuple[int, str, str]]) -> None:
    now = utcnow()
    session.execute(
        insert(IdAllocation),
        [
            {"kind": kind, "number": n, "owner_kind": ok, "owner_name": on, "allocated_at": now}
            for n, ok, on in rows
        ],
    )
