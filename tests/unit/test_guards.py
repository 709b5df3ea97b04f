"""The domain's mass-change guards and ownership rules: pure functions of plain values."""

from __future__ import annotations

from dataclasses import dataclass

from sup.config import ReconcileSettings
from sup.domain.guards import Spent, budget_refusal, mass_change, prune_refusal, too_many_suspensions
from sup.domain.ownership import IMPORT_SOURCE, may_change, may_take_over, refusal


@dataclass(frozen=True)
class Limits:
    max_deletions: int = 3
    max_suspensions: int = 10
    max_suspension_share: float = 0.5


def test_suspensions_over_the_count_or_the_share_are_too_many() -> None:
    limits = Limits()
    assert not too_many_suspensions(10, 1000, limits)
    assert too_many_suspensions(11, 1000, limits)
    assert too_many_suspensions(6, 10, limits)  # 60 % of 10
    assert not too_many_suspensions(5, 6, limits)  # the share counts only above 5 users
    assert not too_many_suspensions(0, 0, limits)


def test_the_reconcile_settings_are_the_limits() -> None:
    settings = ReconcileSettings(max_suspensions=2)
    assert too_many_suspensions(3, 1000, settings) and not too_many_suspensions(2, 1000, settings)


def test_mass_change_names_who_would_leave() -> None:
    leaving = sorted(f"u{n}" for n in range(1, 20))
    assert mass_change([], 20, Limits()) is None
    refusal_text = mass_change(leaving, 20, Limits())
    assert refusal_text is not None
    assert (
        "locks or removes 19 of the 20 users" in refusal_text
        and "u1, u10, u11, u12, u13, ..." in refusal_text
    )


def test_prune_refusal_checks_suspensions_then_deletions() -> None:
    assert prune_refusal(["a"], 3, 100, Limits()) is None
    suspend = prune_refusal([f"u{n}" for n in range(11)], 0, 100, Limits())
    assert suspend is not None and suspend.startswith("--prune would suspend 11 of the 100 active users")
    deletes = prune_refusal([], 4, 100, Limits())
    assert deletes is not None and "delete 4 groups, more than reconcile.max_deletions=3" in deletes


@dataclass(frozen=True)
class Budget:
    suspension_budget: int = 10
    suspension_budget_share: float = 0.5
    deletion_budget: int = 20
    budget_window_seconds: int = 86400


def _leaving(n: int) -> list[str]:
    return [f"u{i}" for i in range(n)]


def test_the_suspension_budget_counts_what_the_window_already_spent() -> None:
    budget = Budget()
    assert budget_refusal(Spent(7), _leaving(3), 0, 1000, budget) is None  # 10: at the budget
    refusal_text = budget_refusal(Spent(8), _leaving(3), 0, 1000, budget)  # 11: over it
    assert refusal_text is not None
    assert "locks or removes 3 users (u0, u1, u2)" in refusal_text
    assert "already locked or removed 8 in the last 24 h: 11 of the 1008 users" in refusal_text
    assert "suspension_budget=10" in refusal_text and "budget_window_seconds=86400" in refusal_text
    assert budget_refusal(Spent(30), [], 0, 1000, budget) is None  # spends nothing: never refused


def test_the_suspension_budget_share_counts_above_five_users() -> None:
    budget = Budget(suspension_budget=100)
    # 6 of the 12 held active in the window (6 now + 6 gone) is 50 %: at the share, not over it.
    assert budget_refusal(Spent(5), _leaving(1), 0, 7, budget) is None
    assert budget_refusal(Spent(5), _leaving(2), 0, 7, budget) is not None  # 7 of 12
    assert budget_refusal(Spent(4), _leaving(1), 0, 0, budget) is None  # 5 users: the share waits


def test_the_deletion_budget_and_a_window_of_zero() -> None:
    budget = Budget()
    assert budget_refusal(Spent(0, 15), [], 5, 100, budget) is None
    refusal_text = budget_refusal(Spent(0, 15), [], 6, 100, budget)
    assert refusal_text is not None and "deletes 6 objects" in refusal_text
    assert "already deleted 15 in the last 24 h: 21, over reconcile.deletion_budget=20" in refusal_text
    off = Budget(budget_window_seconds=0)
    assert budget_refusal(Spent(100, 100), _leaving(50), 50, 60, off) is None


def test_the_reconcile_settings_are_the_budget() -> None:
    settings = ReconcileSettings(suspension_budget=1, budget_window_seconds=600)
    refusal_text = budget_refusal(Spent(1), ["ada"], 0, 1000, settings)
    assert refusal_text is not None and "in the last 10 min" in refusal_text


def test_precedence_decides_who_takes_over() -> None:
    precedence = ["keycloak", "scim:*", "api"]
    assert may_take_over(precedence, "keycloak", "scim:okta")
    assert not may_take_over(precedence, "scim:okta", "keycloak")
    assert may_take_over([], "api", "api") and not may_take_over([], "api", "import")


def test_an_import_changes_only_its_own_unless_ranked_higher() -> None:
    assert may_change(IMPORT_SOURCE) and not may_change("api")
    assert may_change("api", ["import", "api"]) and not may_change("api", ["api", "import"])
    assert "belongs to source 'api'" in refusal("user", "ada", "api")
