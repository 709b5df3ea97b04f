"""The words SUP says about a target, defined once.

Two vocabularies, because they answer two questions:

- `SyncState`: where one user stands on one target (the `target_status` table, the API's
  `TargetState.state`, `sup user status`, the admin page). The reconciler writes `in_sync` or
  `error` after each pass (sup/reconcile/status.py); the read side adds `disabled` (no section in the
  settings) and `pending` (a change waits in the outbox, or no pass reached the user yet).
- `PassState`: how one pass went for one target (`sup plan` / `sup reconcile`, `/plan`,
  `/reconcile`, the reconciler's `/status`).

Both are string enums: their values are what the store holds and what JSON and the CLI print, so a
member compares equal to, and serialises as, the plain word.
"""

from __future__ import annotations

from enum import StrEnum


class SyncState(StrEnum):
    """Where one user stands on one target."""

    DISABLED = "disabled"  # the target has no section in the settings
    PENDING = "pending"  # a change newer than the last verdict waits, or no pass reached the user
    IN_SYNC = "in_sync"  # the last pass that reached the user left the target as desired
    ERROR = "error"  # the last pass failed for the user (the row keeps the message)


class PassState(StrEnum):
    """How one pass went for one target."""

    DISABLED = "disabled"  # not configured: neither read nor written
    PLANNED = "planned"  # read and planned (plan only, or nothing to apply)
    REFUSED = "refused"  # a guard refused the plan (mass change, removal budget); nothing applied
    APPLIED = "applied"  # every change applied
    PARTIAL = "partial"  # applied, some changes failed
    ERROR = "error"  # could not open, read, plan or apply
