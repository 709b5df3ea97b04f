"""Privileged groups in the store: which names they are, and the checks every write path makes.

A group is privileged when an enabled target gives its members power (`Settings.privileged_groups`:
the admin groups of the LDAP and Slurm targets) or a Slurm account names it as its coordinators.
Only the sources in `sources.privileged_group_writers` may create such a group or add members to it
(the rule: sup/domain/privilege.py); the others get `Forbidden` (403), and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from sup.config import Settings
from sup.domain.privilege import refusal
from sup.errors import Forbidden
from sup.store.models import Group, SlurmAccount


def coordinator_groups(session: Session, names: Iterable[str] | None = None) -> frozenset[str]:
    """The groups (of `names`, or all) that some Slurm account names as its coordinators."""
    query = select(Group.name).join(SlurmAccount, SlurmAccount.coordinators_group_id == Group.id)
    if names is not None:
        query = query.where(Group.name.in_(sorted(set(names))))
    return frozenset(session.scalars(query))


def privileged_among(session: Session, settings: Settings, names: Iterable[str]) -> frozenset[str]:
    """Those of `names` that are privileged groups."""
    wanted = set(names)
    if not wanted:
        return frozenset()
    return frozenset(wanted & settings.privileged_groups()) | coordinator_groups(session, wanted)


def check_create(session: Session, settings: Settings, source: str, name: str) -> None:
    """Refuse `source` creating (or renaming a group to) `name` when that is a privileged group."""
    if settings.sources.may_write_privileged(source):
        return
    if privileged_among(session, settings, [name]):
        raise Forbidden(refusal(name, source, "create"))


def check_fill(session: Session, settings: Settings, source: str, groups: Iterable[str]) -> None:
    """Refuse `source` adding members to any of `groups` that is privileged."""
    if settings.sources.may_write_privileged(source):
        return
    privileged = privileged_among(session, settings, groups)
    if privileged:
        raise Forbidden(refusal(min(privileged), source, "add members to"))
