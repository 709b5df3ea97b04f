"""load_snapshot: the whole store as plain data, as the desired state needs it."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.groups.schemas import GroupCreate
from sup.groups.service import create_group
from sup.reconcile.planner import desired_state
from sup.slurm_accounts.schemas import SlurmAccountCreate
from sup.slurm_accounts.service import create_account
from sup.store.session import make_engine, make_sessionmaker
from sup.store.snapshot import load_snapshot
from sup.users.schemas import UserCreate
from sup.users.service import create_user
from tests.conftest import ACTOR
from tests.support import keys


def test_snapshot_holds_users_groups_and_accounts(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    first, second = keys.ed25519_key("laptop"), keys.ed25519_key()
    with sessions.begin() as session:
        create_group(session, settings, ACTOR, GroupCreate(name="physics"))
        create_group(session, settings, ACTOR, GroupCreate(name="leads"))
        create_account(session, ACTOR, SlurmAccountCreate(name="phys", group="physics", coordinators="leads"))
        spec = UserCreate(
            username="kim",
            display_name="Kim W",
            ssh_public_keys=[first, second],
            groups=["physics", "leads"],
            slurm_default_account="phys",
        )
        create_user(session, settings, ACTOR, spec)
        create_user(session, settings, ACTOR, UserCreate(username="saul", active=False, groups=["physics"]))
    with sessions() as session:
        snapshot = load_snapshot(session)
    users = {u.username: u for u in snapshot.users}
    assert users["kim"].ssh_public_keys == (first, second)  # in the order they were given
    assert users["kim"].groups == {"physics", "leads"} and users["kim"].default_account == "phys"
    assert (users["kim"].uid_number, users["kim"].display_name) == (10000, "Kim W")
    assert (
        not users["saul"].active
        and users["saul"].ssh_public_keys == ()
        and users["saul"].default_account is None
    )
    groups = {g.name: g for g in snapshot.groups}
    assert groups["physics"].members == {"kim", "saul"} and groups["physics"].private_for is None
    assert groups["kim"].private_for == "kim" and groups["kim"].gid_number == 10000
    (account,) = snapshot.accounts
    assert (account.name, account.group, account.coordinators, account.parent) == (
        "phys",
        "physics",
        "leads",
        "root",
    )


@pytest.mark.postgres
def test_snapshot_sees_one_moment_on_postgresql(
    postgres_template: str, new_postgres_database: Callable[[bool], str]
) -> None:
    """Writers racing the snapshot's several queries must not make it inconsistent (or crash it)."""
    url = new_postgres_database(True)
    settings = Settings(database_url=url)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:
        create_group(session, settings, ACTOR, GroupCreate(name="physics"))
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set():
            with sessions.begin() as session:
                create_user(session, settings, ACTOR, UserCreate(username=f"racer{n}", groups=["physics"]))
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(30):
            state = desired_state(sessions, settings)
            members = state.groups["physics"].members
            assert members <= set(state.users), "a member the same snapshot does not know"
    finally:
        stop.set()
        thread.join()
        engine.dispose()
