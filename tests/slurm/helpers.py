"""Reading what slurmdbd holds (through sacctmgr, as an operator would) and filling the store."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.groups.schemas import GroupCreate, GroupPatch
from sup.groups.service import create_group, update_group
from sup.slurm_accounts.schemas import SlurmAccountCreate, SlurmAccountPatch
from sup.slurm_accounts.service import create_account, update_account
from sup.users.schemas import UserCreate, UserPatch
from sup.users.service import create_user, update_user
from tests.conftest import ACTOR
from tests.support.slurmdbd import SlurmdbdServer

FIELDS = "Account,User,Partition,ParentName,Fairshare,QOS,DefaultQOS,GrpTRES,GrpJobs,MaxJobs,MaxWall"


def associations(server: SlurmdbdServer, cluster: str) -> set[tuple[str, str, str]]:
    """(account, user, partition) of every user association on the cluster, root's excepted."""
    rows = server.show("association", "where", f"cluster={cluster}", "format=Account,User,Partition")
    return {(a, u, p) for a, u, p in rows if u and u != "root"}


def accounts(server: SlurmdbdServer, cluster: str) -> dict[str, dict[str, str]]:
    """The account rows of the cluster: account -> {ParentName, Fairshare, QOS, ...}."""
    names = FIELDS.split(",")
    rows = server.show("association", "where", f"cluster={cluster}", f"format={FIELDS}")
    return {row[0]: dict(zip(names[2:], row[2:], strict=True)) for row in rows if not row[1]}


def user_row(server: SlurmdbdServer, cluster: str, account: str, user: str) -> dict[str, str]:
    names = FIELDS.split(",")
    rows = server.show(
        "association", "where", f"cluster={cluster}", f"account={account}", f"user={user}", f"format={FIELDS}"
    )
    assert len(rows) == 1, rows
    return dict(zip(names, rows[0], strict=True))


def defaults(server: SlurmdbdServer, cluster: str) -> dict[str, str]:
    rows = server.show(
        "user", "withassoc", "where", f"cluster={cluster}", "format=User,Cluster,DefaultAccount"
    )
    return {u: d for u, c, d in rows if c == cluster and u != "root"}


def users(server: SlurmdbdServer) -> dict[str, str]:
    """Every Slurm user but root, with their AdminLevel."""
    return {u: level for u, level in server.show("user", "format=User,AdminLevel") if u != "root"}


def coordinators(server: SlurmdbdServer) -> dict[str, set[str]]:
    rows = server.show("account", "withcoord", "format=Account,Coordinators")
    return {a: set(filter(None, c.split(","))) for a, c in rows if a != "root"}


# --- the store ---------------------------------------------------------------------------------------


def add_group(sessions: sessionmaker[Session], settings: Settings, name: str) -> None:
    with sessions.begin() as session:
        create_group(session, settings, ACTOR, GroupCreate(name=name))


def add_user(
    sessions: sessionmaker[Session], settings: Settings, name: str, *groups: str, **fields: Any
) -> None:
    with sessions.begin() as session:
        create_user(session, settings, ACTOR, UserCreate(username=name, groups=list(groups), **fields))


def change_user(sessions: sessionmaker[Session], settings: Settings, name: str, **fields: Any) -> None:
    with sessions.begin() as session:
        update_user(session, settings, ACTOR, name, UserPatch(**fields))


def set_members(sessions: sessionmaker[Session], settings: Settings, group: str, *members: str) -> None:
    with sessions.begin() as session:
        update_group(session, settings, ACTOR, group, GroupPatch(members=list(members)))


def add_account(sessions: sessionmaker[Session], name: str, **fields: Any) -> None:
    with sessions.begin() as session:
        create_account(session, ACTOR, SlurmAccountCreate(name=name, **fields))


def change_account(sessions: sessionmaker[Session], name: str, **fields: Any) -> None:
    with sessions.begin() as session:
        update_account(session, ACTOR, name, SlurmAccountPatch(**fields))
