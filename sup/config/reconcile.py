"""The reconciler (`reconcile`) and what happens to deactivated users over time (`lifecycle`)."""

from __future__ import annotations

from pydantic import Field

from sup.common.sections import Section


class ReconcileSettings(Section):
    """The reconciler that `sup serve` runs (settings key `reconcile`; one replica leads): a scoped
    pass seconds after a write, a full pass on a schedule, and the guards against mass changes that
    stop a target's plan unless it is forced (`sup reconcile --force`)."""

    interval_seconds: int = Field(
        300,
        ge=5,
        description="seconds between scheduled full passes (drift nobody reported, the lifecycle)",
    )
    max_deletions: int = Field(
        50,
        ge=0,
        description="a target whose plan deletes more than this many objects is not applied unless forced "
        "(Slurm: associations and accounts)",
    )
    max_suspensions: int = Field(
        20,
        ge=0,
        description="a target that would lock or remove more users than this (users it holds active now) "
        "is not applied unless forced",
    )
    max_suspension_share: float = Field(
        0.1,
        ge=0,
        le=1,
        description="... or more than this share of the users it holds active, when that is over 5 users",
    )
    suspension_budget: int = Field(
        100,
        ge=0,
        description="a target that would lock or remove more users than this within budget_window_seconds "
        "(those already removed in the window plus this plan's) is not applied unless forced: the "
        "per-pass limits above do not see removals that trickle in a few at a time",
    )
    suspension_budget_share: float = Field(
        0.25,
        ge=0,
        le=1,
        description="... or more than this share of the users it held active in the window, when that is "
        "over 5 users",
    )
    deletion_budget: int = Field(
        500,
        ge=0,
        description="a target that would delete more objects than this within budget_window_seconds is not "
        "applied unless forced (the leftovers of users it already holds locked do not count)",
    )
    budget_window_seconds: int = Field(
        86400,
        ge=0,
        description="the window the suspension and deletion budgets count over; 0 turns the budgets off",
    )
    debounce_seconds: float = Field(
        0.3, ge=0, le=60, description="after a write, wait this long for more before a pass (bursts coalesce)"
    )
    poll_seconds: float = Field(0.5, gt=0, le=60, description="how often the worker looks at the outbox")
    max_backoff_seconds: float = Field(
        300, ge=1, description="retries of a failing pass wait 2, 4, 8, ... seconds, up to this"
    )
    leader_retry_seconds: float = Field(
        5, gt=0, le=300, description="how often a standby replica tries to become the active reconciler"
    )


class LifecycleSettings(Section):
    """What happens to a deactivated user over time (settings key `lifecycle`)."""

    delete_after_days: float | None = Field(
        30,
        ge=0,
        description="a user suspended (active=false) this long is deleted from the store and then from the "
        "targets; null: never. Reactivated earlier, they get everything back with the same ids",
    )
    max_deletions_per_pass: int = Field(
        10,
        ge=1,
        description="users the scheduled pass deletes at most for having expired (oldest first), so that "
        "expiries trickle out instead of tripping reconcile.max_deletions",
    )
