"""uid/gid allocation: ranges, supplied numbers, tombstones, private groups, and real concurrency."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.errors import Conflict, InvalidInput
from sup.groups.schemas import GroupCreate
from sup.groups.service import create_group
from sup.store.models import Group, IdAllocation, User
from sup.store.session import make_engine, make_sessionmaker
from sup.users.schemas import UserCreate
from sup.users.service import create_user, delete_user
from tests.conftest import ACTOR


def _settings(database_url: str, **ids: object) -> Settings:
    return Settings(database_url=database_url, ids=ids)


def _create(sessions: sessionmaker[Session], settings: Settings, **fields: object) -> User:
    with sessions.begin() as session:
        return create_user(session, settings, ACTOR, UserCreate.model_validate(fields))


def test_sequential_allocation_and_private_groups(database_url: str, sessions: sessionmaker[Session]) -> None:
    settings = _settings(database_url)
    a = _create(sessions, settings, username="alice")
    b = _create(sessions, settings, username="bob")
    assert (a.uid_number, a.primary_gid) == (10000, 10000)
    assert (b.uid_number, b.primary_gid) == (10001, 10001)
    with sessions.begin() as session:
        private = session.scalars(select(Group).where(Group.name == "bob")).one()
        assert private.gid_number == 10001 and private.private_user_id is not None


def test_supplied_numbers_are_honoured_inside_policy(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    settings = _settings(database_url, supplied_uid_ranges=[{"min": 5000, "max": 5999}])
    assert _create(sessions, settings, username="legacy", uid_number=5042).uid_number == 5042
    assert _create(sessions, settings, username="pinned", uid_number=10007).uid_number == 10007
    # The counter did not move: automatic allocation still starts at the bottom of the range.
    assert _create(sessions, settings, username="next").uid_number == 10000


def test_supplied_numbers_outside_policy_or_taken_are_refused(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    settings = _settings(database_url)
    _create(sessions, settings, username="alice", uid_number=10005)
    with pytest.raises(InvalidInput, match="outside the allowed ranges"):
        _create(sessions, settings, username="bob", uid_number=500)
    with pytest.raises(Conflict, match="in use by user 'alice'"):
        _create(sessions, settings, username="bob", uid_number=10005)
    with pytest.raises(InvalidInput, match="system id"):
        _create(sessions, settings, username="bob", uid_number=65534)
    with sessions.begin() as session:  # nothing of bob was written
        assert session.scalar(select(func.count()).select_from(User).where(User.username == "bob")) == 0


def test_numbers_are_never_reused_after_deletion(database_url: str, sessions: sessionmaker[Session]) -> None:
    settings = _settings(database_url)
    _create(sessions, settings, username="alice")
    with sessions.begin() as session:
        delete_user(session, ACTOR, "alice")
    with pytest.raises(Conflict, match="never reused"):
        _create(sessions, settings, username="mallory", uid_number=10000)
    again = _create(sessions, settings, username="alice")
    assert again.uid_number == 10001  # the same name does not resurrect the old number either
    with sessions.begin() as session:
        tomb = session.get(IdAllocation, ("uid", 10000))
        assert tomb is not None and tomb.released_at is not None and tomb.owner_name == "alice"


def test_allocation_skips_numbers_supplied_earlier(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    settings = _settings(database_url)
    _create(sessions, settings, username="pinned", uid_number=10001)
    assert _create(sessions, settings, username="a").uid_number == 10000
    assert _create(sessions, settings, username="b").uid_number == 10002


def test_private_gid_falls_back_when_uid_is_taken_as_gid(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    settings = _settings(database_url, supplied_gid_ranges=[{"min": 10000, "max": 10000}])
    with sessions.begin() as session:
        create_group(session, settings, ACTOR, GroupCreate(name="legacy", gid_number=10000))
    user = _create(sessions, settings, username="alice")
    assert user.uid_number == 10000
    assert user.primary_gid == 50000  # gid 10000 belongs to "legacy": allocated from gid_range instead


def test_private_groups_off_uses_default_primary_gid(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    settings = _settings(database_url, private_groups=False)
    user = _create(sessions, settings, username="alice")
    assert user.primary_gid == 100
    with sessions.begin() as session:
        assert session.scalars(select(Group).where(Group.name == "alice")).first() is None
    with pytest.raises(InvalidInput, match="no group has gid 4242"):
        _create(sessions, settings, username="bob", primary_gid=4242)


def test_range_exhaustion_is_a_clear_conflict(database_url: str, sessions: sessionmaker[Session]) -> None:
    settings = _settings(database_url, uid_range={"min": 10000, "max": 10001})
    _create(sessions, settings, username="a")
    _create(sessions, settings, username="b")
    with pytest.raises(Conflict, match="no free uid left in range 10000-10001"):
        _create(sessions, settings, username="c")


def test_groups_allocate_from_the_gid_range(database_url: str, sessions: sessionmaker[Session]) -> None:
    settings = _settings(database_url)
    with sessions.begin() as session:
        g1 = create_group(session, settings, ACTOR, GroupCreate(name="physics"))
        g2 = create_group(session, settings, ACTOR, GroupCreate(name="chemistry"))
        assert (g1.gid_number, g2.gid_number) == (50000, 50001)
        with pytest.raises(InvalidInput, match="outside the allowed ranges"):
            create_group(session, settings, ACTOR, GroupCreate(name="bio", gid_number=10))


@pytest.mark.postgres
def test_parallel_creates_on_postgresql_never_share_a_number(
    postgres_template: str, new_postgres_database: Callable[[bool], str]
) -> None:
    """16 threads, each with its own connection, create 25 users and 5 groups at the same time."""
    url = new_postgres_database(True)
    settings = Settings(database_url=url)
    engine = make_engine(url, pool_size=20, max_overflow=0)
    sessions = make_sessionmaker(engine)
    errors: list[BaseException] = []
    barrier = threading.Barrier(16)

    def worker(n: int) -> None:
        try:
            barrier.wait()
            for i in range(25):
                with sessions.begin() as session:
                    create_user(session, settings, ACTOR, UserCreate(username=f"u{n}_{i}"))
                if i % 5 == 0:
                    with sessions.begin() as session:
                        create_group(session, settings, ACTOR, GroupCreate(name=f"g{n}_{i}"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        with sessions.begin() as session:
            uids = list(session.scalars(select(User.uid_number)))
            gids = list(session.scalars(select(Group.gid_number)))
        assert len(uids) == 400 and len(set(uids)) == 400
        assert len(gids) == 480 and len(set(gids)) == 480  # 400 private + 80 ordinary
        # Serialized allocation is also dense: exactly the first 400 numbers of the range.
        assert sorted(uids) == list(range(10000, 10400))
    finally:
        engine.dispose()


def test_batch_allocation_skips_used_and_tombstoned_numbers(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    """The bulk import's allocator follows the same rules: lowest never-used numbers, tombstones
    skipped, supplied numbers refused when taken, and the one-at-a-time allocator continues after it."""
    from sup.config import IdRange
    from sup.store import ids

    settings = _settings(database_url)
    _create(sessions, settings, username="first")  # uid 10000
    _create(sessions, settings, username="gone", uid_number=10002)
    with sessions.begin() as session:
        delete_user(session, ACTOR, "gone")  # 10002 becomes a tombstone
    with sessions.begin() as session:
        numbers = ids.allocate_many(
            session, "uid", IdRange(min=10000, max=10010), [("user", f"b{n}") for n in range(4)], field="uid"
        )
    assert numbers == [10001, 10003, 10004, 10005]
    assert _create(sessions, settings, username="after").uid_number == 10006
    with sessions.begin() as session, pytest.raises(Conflict, match="10002 belonged to user 'gone'"):
        ids.claim_many(
            session, "uid", [(10002, "user", "x")], accepted=[IdRange(min=10000, max=10010)], field="uid"
        )
    with sessions.begin() as session, pytest.raises(Conflict, match="no free uid"):
        ids.allocate_many(
            session, "uid", IdRange(min=10000, max=10010), [("user", f"c{n}") for n in range(6)], field="uid"
        )
    with sessions() as session:
        assert (
            session.scalar(select(func.count()).select_from(IdAllocation).where(IdAllocation.kind == "uid"))
            == 7
        )
