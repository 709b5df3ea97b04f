"""The reconciler's kept desired state: a pass scoped to the outbox's marks reloads only what they
name, and must plan from exactly what a full load of the store would give."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.domain.desired import DesiredState, derive
from sup.groups.service import delete_member, put_member
from sup.reconcile import desired_cache
from sup.reconcile.desired_cache import DesiredCache
from sup.reconcile.planner import policy_of, run_pass, scope_of
from sup.slurm_accounts.schemas import SlurmAccountCreate, SlurmAccountPatch
from sup.slurm_accounts.service import create_account, update_account
from sup.store import outbox
from sup.store.snapshot import load_snapshot
from sup.targets.base import Scope
from sup.users.bulk import create_users
from sup.users.schemas import UserCreate
from tests.conftest import ACTOR
from tests.support import keys
from tests.support.fake_target import FakeSettings, FakeTarget, fake_spec
from tests.support.store_edits import StoreEdits


class Site(StoreEdits):
    def __init__(self, settings: Settings, sessions: sessionmaker[Session]) -> None:
        self.settings, self.sessions = settings, sessions
        self.cache = DesiredCache(max_age=3600)

    def full(self) -> DesiredState:
        with self.sessions() as session:
            return derive(load_snapshot(session), policy_of(self.settings))

    def keep(self) -> None:
        """A full pass: the cache loads everything and the outbox is clear."""
        with self.sessions.begin() as session:
            self.cache.full(session, policy_of(self.settings))
            outbox.clear(session, outbox.pending(session))

    def scope(self) -> Scope:
        with self.sessions() as session:
            scope = scope_of(outbox.pending(session))
        assert scope is not None
        return scope

    def scoped(self, scope: Scope | None = None) -> DesiredState | None:
        """A scoped pass over the outbox's marks; they are cleared, as the pass would."""
        scope = scope or self.scope()
        with self.sessions.begin() as session:
            patched = self.cache.scoped(session, policy_of(self.settings), scope)
            outbox.clear(session, outbox.pending(session))
        return patched

    def member(self, group: str, user: str, present: bool = True) -> None:
        with self.sessions.begin() as session:
            if present:
                put_member(session, self.settings, ACTOR, group, user)
            else:
                delete_member(session, ACTOR, group, user)


@pytest.fixture
def site(settings: Settings, sessions: sessionmaker[Session]) -> Site:
    site = Site(settings, sessions)
    site.add_group("physics")
    site.add_group("leads")
    with sessions.begin() as session:
        create_account(session, ACTOR, SlurmAccountCreate(name="phys", group="physics", coordinators="leads"))
    site.add_user("kim", groups=["physics", "leads"], ssh_public_keys=[keys.ed25519_key("kim")])
    site.add_user("saul", groups=["physics"])
    site.add_user("lee")
    site.keep()
    return site


def _bulk_create(site: Site) -> None:
    with site.sessions.begin() as session:
        specs = [UserCreate(username=f"new{i}", groups=["physics"]) for i in range(3)]
        create_users(session, site.settings, ACTOR, specs, "api")


def _reactivation(site: Site) -> None:
    site.update_user("saul", active=False)
    site.keep()
    site.update_user("saul", active=True)


def _account_change(site: Site) -> None:
    with site.sessions.begin() as session:
        update_account(session, ACTOR, "phys", SlurmAccountPatch(fairshare=5))


WRITES: dict[str, Callable[[Site], Any]] = {
    "a new user in a group": lambda s: s.add_user("ana", groups=["physics"]),
    "users created in bulk": _bulk_create,
    "a user's name and keys": lambda s: s.update_user("kim", display_name="Kim W", ssh_public_keys=[]),
    "a suspension": lambda s: s.update_user("saul", active=False),
    "a reactivation": _reactivation,
    "a user's groups replaced": lambda s: s.update_user("kim", groups=["leads"]),
    "a member added": lambda s: s.member("physics", "lee"),
    "a member removed": lambda s: s.member("physics", "saul", present=False),
    "a user deleted": lambda s: s.delete_user("saul"),
    "a Slurm account changed": _account_change,
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_a_scoped_reload_equals_a_full_load(site: Site, write: Callable[[Site], Any]) -> None:
    write(site)
    patched = site.scoped()
    assert patched is not None  # none of these needs a full load
    assert patched == site.full()
    # and what is kept stays right for the next write
    site.add_user("zed", groups=["physics"])
    assert site.scoped() == site.full()


def test_a_member_list_is_derived_from_its_members_current_state(site: Site) -> None:
    """saul's suspension was covered by another process's pass (its marks are gone), so this
    reconciler never reloaded saul; physics's next member change must still leave saul out."""
    site.update_user("saul", active=False)
    with site.sessions.begin() as session:
        outbox.clear(session, outbox.pending(session))
    site.member("physics", "lee")
    patched = site.scoped()
    assert patched is not None
    assert patched.groups["physics"].members == {"kim", "lee"}
    assert patched.accounts["phys"].members == {"kim", "lee"}
    assert patched == site.full()


def test_a_renamed_group_or_user_loads_everything(site: Site) -> None:
    site.update_group("leads", name="chiefs")
    assert site.scoped() is None
    site.keep()
    site.update_user("kim", username="kimw")  # every group of kim's is named: their lists change
    assert site.scoped() is None


def test_nothing_kept_or_a_new_policy_loads_everything(site: Site) -> None:
    site.cache.clear()
    site.add_user("ana")
    assert site.scoped() is None
    site.keep()
    site.add_user("bo")
    stricter = site.settings.model_copy(
        update={"access": site.settings.access.model_copy(update={"groups": ["physics"]})}
    )
    with site.sessions() as session:
        assert site.cache.scoped(session, policy_of(stricter), site.scope()) is None


def test_too_many_members_to_reload_loads_everything(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(desired_cache, "MAX_RELOAD", 1)
    site.member("physics", "lee")  # physics's other members kim and saul would be reloaded
    assert site.scoped() is None


class Recording(FakeTarget):
    """The fake target, remembering the desired state it planned from."""

    seen: DesiredState | None = None

    def diff(self, desired: DesiredState, observed: Any, scope: Scope | None = None) -> Any:
        self.seen = desired
        if scope is not None:  # plan the scope's users only, as the real targets do
            desired = DesiredState(users={n: u for n, u in desired.users.items() if n in scope.users})
            observed = ({n: uid for n, uid in observed[0].items() if n in scope.users}, observed[1])
        return super().diff(desired, observed, scope)


def test_the_reconcilers_scoped_pass_loads_only_the_marked_users(
    database_url: str, sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = FakeSettings(database_url=database_url, fake={})
    site = Site(settings, sessions)
    site.add_user("kim")
    fake = Recording({})
    scoping = fake_spec(fake)
    scoping = scoping.__class__(**{**scoping.__dict__, "can_scope": lambda section, scope, desired: True})
    cache = DesiredCache(max_age=3600)
    full_loads: list[int] = []
    real = load_snapshot

    def counted(session: Session) -> Any:
        full_loads.append(1)
        return real(session)

    monkeypatch.setattr(desired_cache, "load_snapshot", counted)

    def reconcile(**kw: Any) -> None:
        assert run_pass(settings, sessions, apply=True, specs=[kw.pop("spec", scoping)], cache=cache, **kw).ok

    reconcile()
    assert len(full_loads) == 1 and fake.system == {"kim": 10000}
    site.add_user("saul")
    reconcile(scoped=True)
    assert len(full_loads) == 1, "the scoped pass loaded the whole store"
    assert fake.system == {"kim": 10000, "saul": 10001}
    assert fake.seen is not None and set(fake.seen.users) == {"kim", "saul"}

    # a target that would plan everything gets everything, freshly loaded
    site.add_user("lee")
    reconcile(scoped=True, spec=fake_spec(fake))
    assert len(full_loads) == 2 and set(fake.system) == {"kim", "saul", "lee"}


def test_a_member_who_lost_access_loses_their_private_group_too(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    """With `access.groups`, leaving physics unprovisions saul. Another process's pass covered it;
    leads's next member change reloads saul, who must vanish with his private group."""
    site = Site(Settings(database_url=database_url, access={"groups": ["physics"]}), sessions)
    site.add_group("physics")
    site.add_group("leads")
    site.add_user("saul", groups=["physics", "leads"])
    site.add_user("lee", groups=["physics"])
    site.keep()
    site.member("physics", "saul", present=False)
    with sessions.begin() as session:
        outbox.clear(session, outbox.pending(session))
    site.member("leads", "lee")
    patched = site.scoped()
    assert patched is not None
    assert "saul" not in patched.users and "saul" not in patched.groups
    assert patched == site.full()
