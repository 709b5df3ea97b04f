"""Concurrent writes of homes on a real PostgreSQL (issue 24): of two transactions writing the same
home, or homes one inside the other, exactly one commits; the other gets the Conflict a sequential
write gets, naming the person. Made deterministic: the first transaction stays open until the second
is seen waiting on a lock (or, without the `homes` lock, has finished), then commits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.errors import Conflict
from sup.store.models import User
from sup.store.session import make_engine, make_sessionmaker
from sup.users.schemas import UserCreate, UserPatch
from sup.users.service import create_user, update_user
from tests.conftest import ACTOR

pytestmark = pytest.mark.postgres


def _waiting_on_a_lock(sessions: sessionmaker[Session]) -> bool:
    with sessions() as session:
        return bool(session.scalar(text("SELECT count(*) FROM pg_locks WHERE NOT granted")))


def _race(
    sessions: sessionmaker[Session], first: Callable[[Session], object], second: Callable[[Session], object]
) -> BaseException | None:
    """Run `first` in an open transaction, `second` in a thread while it is open, commit `first`;
    what `second` raised (None: it committed too)."""
    outcome: list[BaseException | None] = []

    def run_second() -> None:
        try:
            with sessions.begin() as session:
                second(session)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    with sessions.begin() as session:
        first(session)
        thread = threading.Thread(target=run_second)
        thread.start()
        deadline = time.monotonic() + 10
        while not outcome and not _waiting_on_a_lock(sessions) and time.monotonic() < deadline:
            time.sleep(0.02)
    thread.join(timeout=30)
    assert outcome, "the second write never finished"
    return outcome[0]


def _create(settings: Settings, username: str, home: str | None = None) -> Callable[[Session], object]:
    spec = UserCreate(username=username, home_directory=home)
    return lambda session: create_user(session, settings, ACTOR, spec)


def _move(settings: Settings, username: str, home: str) -> Callable[[Session], object]:
    patch = UserPatch(home_directory=home)
    return lambda session: update_user(session, settings, ACTOR, username, patch)


_SAME = "'/home/shared' is already used by another user ('amy')"
_CONTAINS = "'/home/alice' contains the home '/home/alice/.ssh' of user 'bob'"
_INSIDE = "lies inside the home '/home/alice' of user 'alice'"


@pytest.mark.parametrize(
    ("first", "second", "said"),
    [
        (("amy", "/home/shared"), ("bob", "/home/shared"), _SAME),
        (("bob", "/home/alice/.ssh"), ("alice", None), _CONTAINS),
        (("alice", None), ("bob", "/home/alice/.ssh"), _INSIDE),
    ],
)
def test_two_creates_at_once_one_home_one_409(
    postgres_template: str,
    new_postgres_database: Callable[[bool], str],
    first: tuple[str, str | None],
    second: tuple[str, str | None],
    said: str,
) -> None:
    url = new_postgres_database(True)
    settings = Settings(database_url=url)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    try:
        refused = _race(sessions, _create(settings, *first), _create(settings, *second))
        assert isinstance(refused, Conflict), refused
        assert refused.field == "home_directory" and said in refused.message
        with sessions() as session:
            assert list(session.scalars(select(User.username))) == [first[0]]
    finally:
        engine.dispose()


def test_a_change_racing_a_create_cannot_nest_homes(
    postgres_template: str, new_postgres_database: Callable[[bool], str]
) -> None:
    """A PATCH of a home does not allocate ids, so only the `homes` lock orders it against a create."""
    url = new_postgres_database(True)
    settings = Settings(database_url=url)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    try:
        with sessions.begin() as session:
            create_user(session, settings, ACTOR, UserCreate(username="carol"))
        refused = _race(
            sessions, _create(settings, "bob", "/home/alice/x"), _move(settings, "carol", "/home/alice")
        )
        assert isinstance(refused, Conflict) and "of user 'bob'" in refused.message, refused
        with sessions() as session:
            rows = session.execute(select(User.username, User.home_directory)).all()
            homes = {row.username: row.home_directory for row in rows}
        assert homes == {"carol": "/home/carol", "bob": "/home/alice/x"}
    finally:
        engine.dispose()
