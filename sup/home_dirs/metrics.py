"""Prometheus metrics of `sup homes serve` (per process)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

ACTIONS = Counter(
    "sup_home_dirs_total", "Home directories made, fixed, moved, and refusals newly seen", ["outcome"]
)
REFUSED = Gauge("sup_home_dirs_refused", "Homes refused in the last pass (see the logs for why)")
HOMES = Gauge("sup_home_dirs_homes", "Homes that are their person's after the last pass")
PASSES = Counter("sup_home_dirs_passes_total", "Passes, by trigger", ["trigger"])
ERRORS = Counter("sup_home_dirs_errors_total", "Passes or watches that failed, by what failed", ["what"])
