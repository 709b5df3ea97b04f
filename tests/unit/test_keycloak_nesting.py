"""Keycloak subgroups (keycloak.flatten_subgroups): what a read realm makes of the store's groups,
on a migrated SQLite store (the compare-and-write step, without a Keycloak)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.sources.keycloak.reader import KcGroup, KcUser, RealmSnapshot
from sup.sources.keycloak.report import Scope, SyncReport
from sup.sources.keycloak.sync import apply
from sup.store.models import Group

KC = {"url": "https://sso.example.org", "realm": "hpc", "client_id": "sup", "client_secret": "s"}


def _settings(**keycloak: Any) -> Settings:
    return Settings(keycloak={**KC, **keycloak})


def _user(name: str) -> KcUser:
    return KcUser(
        id=f"u-{name}",
        username=name,
        email=None,
        first_name=None,
        last_name=None,
        enabled=True,
        attributes={},
    )


def _realm() -> RealmSnapshot:
    """/hpc holds bob; /hpc/gpu holds nobody directly; /hpc/gpu/a100 holds alice; /ml holds carol."""
    groups = [
        KcGroup("g-hpc", "hpc", "/hpc"),
        KcGroup("g-gpu", "gpu", "/hpc/gpu", parent_id="g-hpc"),
        KcGroup("g-a100", "a100", "/hpc/gpu/a100", parent_id="g-gpu"),
        KcGroup("g-ml", "ml", "/ml"),
    ]
    return RealmSnapshot(
        users={u.id: u for u in map(_user, ["alice", "bob", "carol"])},
        groups={g.id: g for g in groups},
        members={"g-hpc": {"u-bob"}, "g-gpu": set(), "g-a100": {"u-alice"}, "g-ml": {"u-carol"}},
    )


def _sync(
    sessions: sessionmaker[Session], settings: Settings, snapshot: RealmSnapshot, **scope: Any
) -> SyncReport:
    with sessions.begin() as session:
        return apply(session, settings, snapshot, scope=Scope(**scope) if scope else None)


def _groups(sessions: sessionmaker[Session]) -> dict[str, list[str]]:
    with sessions() as session:
        groups = session.scalars(select(Group).where(Group.private_user_id.is_(None))).all()
        return {g.name: sorted(m.user.username for m in g.memberships) for g in groups}


def test_by_default_a_group_holds_its_direct_members_only(store_sessions: sessionmaker[Session]) -> None:
    report = _sync(store_sessions, _settings(), _realm())
    assert report.ok, report.as_json()
    assert _groups(store_sessions) == {"hpc": ["bob"], "gpu": [], "a100": ["alice"], "ml": ["carol"]}


def test_flattened_a_parent_holds_its_subgroups_members(store_sessions: sessionmaker[Session]) -> None:
    settings = _settings(flatten_subgroups=True)
    report = _sync(store_sessions, settings, _realm())
    assert report.ok and not report.group_cycles, report.as_json()
    assert _groups(store_sessions) == {
        "hpc": ["alice", "bob"],
        "gpu": ["alice"],
        "a100": ["alice"],
        "ml": ["carol"],
    }
    assert _sync(store_sessions, settings, _realm()).writes == 0  # stable: nothing to change again

    # Alice leaves /hpc/gpu/a100 for /ml: she leaves its parents too (a full pull) ...
    moved = _realm()
    moved.members["g-a100"] = set()
    moved.members["g-ml"] = {"u-carol", "u-alice"}
    report = _sync(store_sessions, settings, moved)
    assert report.members_removed == 3 and report.members_added == 1
    assert _groups(store_sessions) == {"hpc": ["bob"], "gpu": [], "a100": [], "ml": ["alice", "carol"]}

    # ... and, from membership events (the user's direct groups and the tree, no member lists), she
    # comes back to /hpc/gpu/a100 and so to /hpc/gpu and /hpc.
    events = _realm()
    events.users = {"u-alice": events.users["u-alice"]}
    events.members = {}
    report = _sync(
        store_sessions,
        settings,
        events,
        users=frozenset({"u-alice"}),
        groups_complete=True,
        member_groups=frozenset(),
        user_groups={"u-alice": {"g-a100"}},
    )
    assert report.ok, report.as_json()
    assert _groups(store_sessions) == {
        "hpc": ["alice", "bob"],
        "gpu": ["alice"],
        "a100": ["alice"],
        "ml": ["carol"],
    }


def test_a_cycle_is_flattened_and_reported(store_sessions: sessionmaker[Session]) -> None:
    """A tree has no cycles; should a realm's answer hold one, the sync ends and says so."""
    snapshot = _realm()
    snapshot.groups["g-hpc"] = KcGroup("g-hpc", "hpc", "/hpc", parent_id="g-a100")
    report = _sync(store_sessions, _settings(flatten_subgroups=True), snapshot)
    assert report.ok and len(report.group_cycles) == 1, report.as_json()
    assert "/hpc" in report.group_cycles[0] and "/hpc/gpu/a100" in report.group_cycles[0]
    groups = _groups(store_sessions)
    assert groups["hpc"] == groups["gpu"] == groups["a100"] == ["alice", "bob"]
