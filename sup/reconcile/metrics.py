"""Prometheus metrics of the reconciler (served on /metrics by `sup serve`)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

PASS_DURATION = Histogram(
    "sup_reconcile_target_pass_seconds",
    "Time to observe, plan and apply one target in one pass",
    ["target", "mode"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600),
)
DRIFT_FOUND = Counter(
    "sup_reconcile_changes_planned_total", "Changes a pass found necessary (drift and new work)", ["target"]
)
CHANGES_APPLIED = Counter("sup_reconcile_changes_applied_total", "Changes applied", ["target"])
CHANGES_FAILED = Counter("sup_reconcile_changes_failed_total", "Changes that failed", ["target"])
TARGET_ERRORS = Counter(
    "sup_reconcile_target_errors_total", "Passes in which a target could not be read or written", ["target"]
)
REFUSALS = Counter(
    "sup_reconcile_refusals_total", "Passes a safety limit stopped for a target (until forced)", ["target"]
)
LAST_SUCCESS = Gauge(
    "sup_reconcile_last_success_timestamp_seconds", "When a target last finished a pass cleanly", ["target"]
)
OUTBOX_DEPTH = Gauge("sup_outbox_depth", "Users, groups and accounts marked dirty and not yet provisioned")
LEADER = Gauge("sup_reconciler_leader", "1 while this process is the active reconciler")
PASSES = Counter("sup_reconcile_passes_total", "Reconcile passes run", ["trigger"])
TARGET_UP = Gauge(
    "sup_reconcile_target_up",
    "1 if the target's last applying pass could read and write it, 0 if it failed (error or refused)",
    ["target"],
)
LAST_PASS_CHANGES = Gauge(
    "sup_reconcile_last_pass_changes",
    "Changes the target's last applying pass found necessary: above 0 pass after pass is drift that "
    "does not clear",
    ["target"],
)
OUTBOX_OLDEST_AGE = Gauge(
    "sup_outbox_oldest_age_seconds", "Age of the oldest outbox mark not yet provisioned (0: empty)"
)
