"""The planner's orchestration across targets, with an in-memory target standing in for a server."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.reconcile.planner import MAX_SCOPED_USERS, Pass, run_pass, scope_of
from sup.store.models import AuditEntry, TargetRemoval, TargetStatus
from sup.targets.base import Scope
from sup.targets.spec import POSIX_IDENTITY
from sup.users.schemas import UserPatch
from sup.users.service import delete_user, update_user
from tests.conftest import ACTOR
from tests.support.fake_target import FakeSettings, FakeTarget, fake_settings, fake_spec
from tests.support.store_edits import add_users


def _pass(settings: Settings, sessions: sessionmaker[Session], fake: FakeTarget, **kw: Any) -> Pass:
    return run_pass(settings, sessions, only=["fake"], specs=[fake_spec(fake)], **kw)


def _statuses(sessions: sessionmaker[Session]) -> dict[str, tuple[str, str | None]]:
    with sessions() as session:
        rows = session.scalars(select(TargetStatus).where(TargetStatus.target == "fake"))
        return {r.username: (r.state, r.last_error) for r in rows}


def test_plan_changes_nothing_and_reconcile_converges(
    configured: Settings, sessions: sessionmaker[Session]
) -> None:
    add_users(sessions, configured, "kim", "saul")
    fake = FakeTarget({"stranger": 12345, "kim": 1})

    planned = _pass(configured, sessions, fake)
    assert [(c.action, c.name) for c in planned.changes] == [
        ("update", "kim"),
        ("create", "saul"),
        ("delete", "stranger"),
    ]
    assert fake.writes == 0 and fake.closed

    applied = _pass(configured, sessions, fake, apply=True)
    assert applied.ok and applied.targets[0].state == "applied"
    assert fake.system == {"kim": 10000, "saul": 10001}
    assert _statuses(sessions) == {"kim": ("in_sync", None), "saul": ("in_sync", None)}

    writes = fake.writes
    again = _pass(configured, sessions, fake, apply=True)
    assert again.changes == [] and fake.writes == writes  # a pass without drift writes nothing


def test_disabled_and_failing_targets_do_not_stop_the_others(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    settings = fake_settings("fake", "down", "off")(database_url=database_url, fake={}, down={})
    add_users(sessions, settings, "kim")
    fake = FakeTarget({})
    specs = [fake_spec(fake), fake_spec(None, "down"), fake_spec(None, "off")]
    result = run_pass(settings, sessions, apply=True, specs=specs)
    states = {t.target: (t.state, t.error) for t in result.targets}
    assert states == {
        "fake": ("applied", None),
        "down": ("error", "down is down"),
        "off": ("disabled", None),
    }
    assert fake.system == {"kim": 10000} and not result.ok


def test_partial_read_plans_nothing_and_marks_users_in_error(
    configured: Settings, sessions: sessionmaker[Session]
) -> None:
    add_users(sessions, configured, "kim")
    fake = FakeTarget({"stranger": 1}, fail_observe=True)
    result = _pass(configured, sessions, fake, apply=True)
    assert result.targets[0].state == "error" and result.changes == []
    assert fake.system == {"stranger": 1}  # nothing deleted on a partial read
    assert _statuses(sessions) == {"kim": ("error", "the fake server returned a partial result")}


def test_one_failing_user_does_not_stop_the_rest(
    configured: Settings, sessions: sessionmaker[Session]
) -> None:
    add_users(sessions, configured, "kim", "saul")
    fake = FakeTarget({}, fail_user="kim")
    result = _pass(configured, sessions, fake, apply=True)
    assert result.targets[0].state == "partial"
    assert fake.system == {"saul": 10001}
    assert _statuses(sessions) == {"kim": ("error", "the fake server said no"), "saul": ("in_sync", None)}


def test_mass_deletion_is_refused_unless_forced(database_url: str, sessions: sessionmaker[Session]) -> None:
    settings = FakeSettings(database_url=database_url, fake={}, reconcile={"max_deletions": 2})
    fake = FakeTarget({f"gone{i}": i for i in range(3)})
    refused = _pass(settings, sessions, fake, apply=True)
    assert refused.targets[0].state == "refused" and "max_deletions=2" in (refused.targets[0].error or "")
    assert len(fake.system) == 3
    add_users(sessions, settings, "kim")
    held = _pass(settings, sessions, fake, apply=True)
    assert held.targets[0].state == "refused"
    state, error = _statuses(sessions)["kim"]
    assert state == "error" and "max_deletions" in (error or "")  # refused work is not "in sync"
    forced = _pass(settings, sessions, fake, apply=True, force=True)
    assert forced.targets[0].state == "applied" and fake.system == {"kim": 10000}


def test_deleted_user_loses_its_status_row(configured: Settings, sessions: sessionmaker[Session]) -> None:
    add_users(sessions, configured, "kim")
    fake = FakeTarget({})
    _pass(configured, sessions, fake, apply=True)
    with sessions.begin() as session:
        delete_user(session, ACTOR, "kim")
    _pass(configured, sessions, fake, apply=True)
    assert fake.system == {} and _statuses(sessions) == {}


def test_unknown_target_name_is_refused(configured: Settings, sessions: sessionmaker[Session]) -> None:
    with pytest.raises(ValueError, match="unknown target"):
        run_pass(configured, sessions, only=["nfs"])


def test_a_scope_names_the_marked_users_and_groups_and_is_none_when_too_wide() -> None:
    marks = [("user", "kim", 1), ("group", "physics", 2), ("account", "phys", 1), ("user", "saul", 3)]
    assert scope_of(marks) == Scope(frozenset({"kim", "saul"}), frozenset({"physics"}))
    assert scope_of([]) is None  # nothing named: a full pass
    named = scope_of([("slurm_account", "phys", 1), ("user", "kim", 1)])
    assert named == Scope(frozenset({"kim"}), frozenset(), frozenset({"phys"}))  # Slurm's can_scope says no
    joined = scope_of(
        [("user", "kim", 1), ("members", "physics", 1), ("members", "chem", 1), ("group", "chem", 1)]
    )
    assert joined == Scope(
        frozenset({"kim"}), frozenset({"physics", "chem"}), members_only=frozenset({"physics"})
    )
    assert joined.changed_groups == {"chem"}  # renamed or renumbered too: not a member list alone
    many = [("user", f"u{i}", 1) for i in range(MAX_SCOPED_USERS + 1)]
    assert scope_of(many) is None  # one GET per object would cost more than a list


def _suspend(sessions: sessionmaker[Session], settings: Settings, *names: str) -> None:
    with sessions.begin() as session:
        for name in names:
            update_user(session, settings, ACTOR, name, UserPatch(active=False))


def _let_the_window_pass(sessions: sessionmaker[Session], seconds: int) -> None:
    with sessions.begin() as session:
        for row in session.scalars(select(TargetRemoval)):
            row.at -= timedelta(seconds=seconds + 1)


def test_suspensions_that_trickle_in_stop_at_the_windows_budget(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    budget = {"max_suspensions": 2, "suspension_budget": 3, "suspension_budget_share": 1.0}
    settings = FakeSettings(database_url=database_url, fake={}, reconcile=budget)
    add_users(sessions, settings, *(f"u{i}" for i in range(10)))
    fake = FakeTarget({})
    assert _pass(settings, sessions, fake, apply=True).ok

    _suspend(sessions, settings, "u0", "u1")  # 2: under the per-pass limit, within the budget
    assert _pass(settings, sessions, fake, apply=True).targets[0].state == "applied"
    _suspend(sessions, settings, "u2", "u3")  # 2 more: still under the per-pass limit, over the budget
    refused = _pass(settings, sessions, fake, apply=True).targets[0]
    assert refused.state == "refused" and fake.locked == {"u0", "u1"}
    assert "already locked or removed 2 in the last 24 h" in (refused.error or "")
    assert "suspension_budget=3" in (refused.error or "")
    assert _statuses(sessions)["u2"][0] == "error"  # surfaced like any refusal

    _let_the_window_pass(sessions, 86400)
    assert _pass(settings, sessions, fake, apply=True).targets[0].state == "applied"
    assert fake.locked == {"u0", "u1", "u2", "u3"}

    _suspend(sessions, settings, "u4", "u5")
    assert _pass(settings, sessions, fake, apply=True).targets[0].state == "refused"
    forced = _pass(settings, sessions, fake, apply=True, force=True).targets[0]
    assert forced.state == "applied" and {"u4", "u5"} <= fake.locked
    with sessions() as session:
        audit = session.scalars(select(AuditEntry).where(AuditEntry.action == "force")).one()
    assert (audit.actor, audit.resource_type, audit.resource_name) == ("reconciler", "target", "fake")
    assert "suspension_budget=3" in (audit.after or {})["refusal"]
    # What the operator forced through vouches for what came before: the budget counts afresh.
    _suspend(sessions, settings, "u6", "u7")
    assert _pass(settings, sessions, fake, apply=True).targets[0].state == "applied"


def test_deletions_that_trickle_in_stop_at_the_deletion_budget(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    budget = {"deletion_budget": 2, "suspension_budget": 100, "max_suspensions": 100}
    settings = FakeSettings(database_url=database_url, fake={}, reconcile=budget)
    add_users(sessions, settings, "kim", "saul", "howard", "chuck")
    fake = FakeTarget({})
    assert _pass(settings, sessions, fake, apply=True).ok
    for name in ("kim", "saul"):
        with sessions.begin() as session:
            delete_user(session, ACTOR, name)
        assert _pass(settings, sessions, fake, apply=True).targets[0].state == "applied"
    with sessions.begin() as session:
        delete_user(session, ACTOR, "howard")
    refused = _pass(settings, sessions, fake, apply=True).targets[0]
    assert refused.state == "refused" and "howard" in fake.system
    assert "already deleted 2 in the last 24 h: 3, over reconcile.deletion_budget=2" in (refused.error or "")


def test_posix_identity_is_applied_before_the_target_that_needs_it(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    """A scheduler that looks a user up before the directory has them caches the failure: the target
    that needs POSIX identity plans after its provider applied, and creates nothing for a user the
    provider does not hold (here: failed for)."""
    settings = fake_settings("posix", "sched")(database_url=database_url, posix={}, sched={})
    add_users(sessions, settings, "kim", "saul")
    journal: list[str] = []
    posix = FakeTarget({}, journal=journal, apply_delay=0.3, fail_user="saul", label="posix")  # slow
    sched = FakeTarget({}, journal=journal, label="sched")
    specs = [
        replace(fake_spec(sched, "sched"), needs=frozenset({POSIX_IDENTITY})),
        replace(fake_spec(posix, "posix"), provides=frozenset({POSIX_IDENTITY})),
    ]
    first = run_pass(settings, sessions, apply=True, specs=specs)
    assert [t.state for t in first.targets] == ["applied", "partial"]
    assert journal == ["posix create kim", "sched create kim"]  # the provider's write first
    assert sched.system == {"kim": 10000}  # saul waits for his identity

    journal.clear()
    assert run_pass(settings, sessions, apply=True, specs=specs, only=["sched"]).changes == []
    posix.fail_user = None
    assert run_pass(settings, sessions, apply=True, specs=specs).ok
    assert journal == ["posix create saul", "sched create saul"]
    assert sched.system == {"kim": 10000, "saul": 10001}


def test_a_provider_not_in_the_pass_counts_by_its_statuses(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    settings = fake_settings("posix", "sched")(database_url=database_url, posix={}, sched={})
    add_users(sessions, settings, "kim")
    posix, sched = FakeTarget({}), FakeTarget({})
    specs = [
        replace(fake_spec(sched, "sched"), needs=frozenset({POSIX_IDENTITY})),
        replace(fake_spec(posix, "posix"), provides=frozenset({POSIX_IDENTITY})),
    ]
    assert run_pass(settings, sessions, apply=True, specs=specs, only=["sched"]).changes == []
    assert run_pass(settings, sessions, apply=True, specs=specs, only=["posix"]).ok
    run_pass(settings, sessions, apply=True, specs=specs, only=["sched"])
    assert sched.system == {"kim": 10000}
    # Without an enabled provider (a site whose directory SUP does not manage), nothing waits.
    alone = fake_settings("sched")(database_url=database_url, sched={})
    add_users(sessions, alone, "saul")
    run_pass(alone, sessions, apply=True, specs=specs[:1])
    assert sched.system == {"kim": 10000, "saul": 10001}


def _scoped(settings: Settings, sessions: sessionmaker[Session], *specs: Any) -> Pass:
    """A pass after writes (as the reconciler runs one) over targets that can plan just the scope."""
    return run_pass(settings, sessions, apply=True, scoped=True, specs=specs)


def test_a_scoped_pass_weighs_its_suspensions_against_everyone_the_target_holds(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    """A pass after writes reads the status rows of the users it names only, but a mass suspension's
    share (per pass and over the budget's window) is of all the users the target holds active: six
    of twenty is under half, eleven of the fourteen left is over."""
    limits = {
        "max_suspensions": 100,
        "max_suspension_share": 0.5,
        "suspension_budget": 100,
        "suspension_budget_share": 0.5,
    }
    settings = FakeSettings(database_url=database_url, fake={}, reconcile=limits)
    names = [f"u{i:02}" for i in range(20)]
    add_users(sessions, settings, *names)
    fake = FakeTarget({})
    spec = fake_spec(fake, scoping=True)
    assert run_pass(settings, sessions, apply=True, specs=[spec]).ok  # full: clears the marks

    _suspend(sessions, settings, *names[:6])
    six = _scoped(settings, sessions, spec).targets[0]
    assert six.error is None and (six.scoped, six.state) == (True, "applied")
    assert fake.locked == set(names[:6])

    _suspend(sessions, settings, *names[6:17])
    eleven = _scoped(settings, sessions, spec).targets[0]
    assert eleven.scoped and eleven.state == "refused"
    assert "locks or removes 11 of the 14 users active" in (eleven.error or "")
    assert fake.locked == set(names[:6])


def test_in_a_scoped_pass_the_needing_target_waits_for_the_scopes_identities(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    settings = fake_settings("posix", "sched")(database_url=database_url, posix={}, sched={})
    add_users(sessions, settings, "kim")
    journal: list[str] = []
    posix = FakeTarget({}, journal=journal, apply_delay=0.3, label="posix")
    sched = FakeTarget({}, journal=journal, label="sched")
    specs = [
        replace(fake_spec(sched, "sched", scoping=True), needs=frozenset({POSIX_IDENTITY})),
        replace(fake_spec(posix, "posix", scoping=True), provides=frozenset({POSIX_IDENTITY})),
    ]
    assert run_pass(settings, sessions, apply=True, specs=specs).ok
    journal.clear()

    add_users(sessions, settings, "saul", "ada")
    posix.fail_user = "saul"
    first = _scoped(settings, sessions, *specs)
    assert [(t.scoped, t.state) for t in first.targets] == [(True, "applied"), (True, "partial")]
    assert journal == ["posix create ada", "sched create ada"]  # the provider's write first; saul waits
    assert sched.system == {"kim": 10000, "ada": 10002}

    journal.clear()
    posix.fail_user = None
    assert _scoped(settings, sessions, *specs).ok  # the marks stayed: the same scope again
    assert journal == ["posix create saul", "sched create saul"]
    assert sched.system == {"kim": 10000, "ada": 10002, "saul": 10001}
