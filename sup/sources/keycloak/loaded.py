"""The store as one Keycloak sync sees it (loaded once), and the savepoint each object's write runs in."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from sup.domain.posix import InvalidName
from sup.errors import SupError
from sup.sources.keycloak.naming import SOURCE
from sup.sources.keycloak.report import SyncReport
from sup.store.models import Group, User

log = logging.getLogger("sup.sources.keycloak.sync")


class LoadedStore:
    """The store's users and groups, loaded once per sync, by name and by Keycloak id."""

    def __init__(self, session: Session) -> None:
        all_users = session.scalars(select(User).options(selectinload(User.ssh_keys))).all()
        self.user_by_name = {u.username: u for u in all_users}
        self.user_by_kc = {u.external_id: u for u in all_users if u.source == SOURCE and u.external_id}
        all_groups = session.scalars(select(Group).options(selectinload(Group.memberships))).all()
        self.group_by_name = {g.name: g for g in all_groups}
        self.group_by_kc = {g.external_id: g for g in all_groups if g.source == SOURCE and g.external_id}


def guarded(session: Session, report: SyncReport, what: str, action: Any) -> None:
    """Run one object's change in a savepoint: a refused change is reported, the others go on."""
    try:
        with session.begin_nested():
            action()
    except (SupError, ValidationError, InvalidName) as exc:
        message = exc.message if isinstance(exc, SupError) else _validation_text(exc)
        report.errors.append(f"{what}: {message}")
        log.warning("keycloak sync: %s: %s", what, message)


def _validation_text(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_input=False)
        )
    return str(exc)
