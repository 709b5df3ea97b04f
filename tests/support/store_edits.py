"""Changing the store the way SUP's own writers do (through the services), for test sites that keep
`settings` and `sessions`: each call is one committed transaction by the tests' actor."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.groups.schemas import GroupCreate, GroupPatch
from sup.groups.service import create_group, update_group
from sup.users.schemas import UserCreate, UserPatch
from sup.users.service import create_user, delete_user, update_user
from tests.conftest import ACTOR


class StoreEdits:
    settings: Settings
    sessions: sessionmaker[Session]

    def add_user(self, username: str, **fields: Any) -> None:
        with self.sessions.begin() as session:
            create_user(session, self.settings, ACTOR, UserCreate(username=username, **fields))

    def update_user(self, current_name: str, /, **fields: Any) -> None:
        with self.sessions.begin() as session:
            update_user(session, self.settings, ACTOR, current_name, UserPatch(**fields))

    def delete_user(self, username: str) -> None:
        with self.sessions.begin() as session:
            delete_user(session, ACTOR, username)

    def add_group(self, name: str, **fields: Any) -> None:
        with self.sessions.begin() as session:
            create_group(session, self.settings, ACTOR, GroupCreate(name=name, **fields))

    def update_group(self, current_name: str, /, **fields: Any) -> None:
        with self.sessions.begin() as session:
            update_group(session, self.settings, ACTOR, current_name, GroupPatch(**fields))


def add_users(sessions: sessionmaker[Session], settings: Settings, *names: str) -> None:
    """Create these users in one transaction, for tests that hold `sessions` and `settings` apart."""
    with sessions.begin() as session:
        for name in names:
            create_user(session, settings, ACTOR, UserCreate(username=name))
