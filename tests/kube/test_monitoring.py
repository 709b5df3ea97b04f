"""The chart's monitoring parts (issue 10): a Grafana dashboard ConfigMap and a PrometheusRule, each
behind a values.yaml toggle, that `helm lint` accepts and whose every PromQL expression names only
metrics SUP really exports (checked against SUP's Prometheus registry, so renaming a metric without
updating the dashboard or the alerts fails here)."""

from __future__ import annotations

import json
import re
from typing import Any

from prometheus_client import REGISTRY

import sup.app  # noqa: F401  (registers every metric SUP exports)
from tests.support.helm import CHART, helm, render

ON = ("monitoring.grafanaDashboard.enabled=true", "monitoring.prometheusRule.enabled=true")
ALERTS = {"SupOutboxStuck", "SupTargetFailing", "SupDriftNotClearing"}


def _exported() -> set[str]:
    """Every sample name SUP's /metrics can contain (a labelled family shows none until first used)."""
    names: set[str] = set()
    for family in REGISTRY.collect():
        if not family.name.startswith("sup_"):
            continue
        suffixes = {
            "counter": ("_total", "_created"),
            "histogram": ("_bucket", "_count", "_sum", "_created"),
            "gauge": ("",),
        }[family.type]
        names |= {family.name + suffix for suffix in suffixes}
    return names


def _metrics_in(expr: str) -> set[str]:
    return set(re.findall(r"\bsup_[a-z0-9_]+", expr))


def _by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objects if o["kind"] in ("PrometheusRule", "ConfigMap")
            and ("dashboard" in o["metadata"]["name"] or o["kind"] == "PrometheusRule")}  # fmt: skip


def test_monitoring_is_off_by_default_and_lints_when_on(helm_binary: str) -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in render(helm_binary, "sup-system")}
    assert ("PrometheusRule", "sup") not in kinds and ("ConfigMap", "sup-dashboard") not in kinds
    args = [a for setting in ON for a in ("--set", setting)]
    result = helm(helm_binary, "lint", "--strict", str(CHART), *args)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_and_alerts_name_only_metrics_sup_exports(helm_binary: str) -> None:
    objects = _by_kind(
        render(helm_binary, "sup-system", *ON, "monitoring.grafanaDashboard.namespace=grafana")
    )
    exported = _exported()
    assert {"sup_outbox_oldest_age_seconds", "sup_reconcile_target_up", "sup_http_requests_total"} <= exported

    dashboard_map = objects["ConfigMap"]
    assert dashboard_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard_map["metadata"]["namespace"] == "grafana"
    dashboard = json.loads(dashboard_map["data"]["sup.json"])
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 15
    for expr in exprs:
        used = _metrics_in(expr)
        assert used, expr
        assert used <= exported, f"dashboard: {sorted(used - exported)} not exported ({expr})"
    covered = set().union(*map(_metrics_in, exprs))
    assert {"sup_http_request_duration_seconds_bucket", "sup_scim_requests_total",
            "sup_reconcile_target_pass_seconds_bucket", "sup_outbox_depth"} <= covered  # fmt: skip

    rules = objects["PrometheusRule"]["spec"]["groups"][0]["rules"]
    assert {r["alert"] for r in rules} >= ALERTS
    for rule in rules:
        used = _metrics_in(rule["expr"])
        assert used and used <= exported, f"{rule['alert']}: {sorted(used - exported)} not exported"
        assert rule["labels"]["severity"] and rule["annotations"]["summary"]
    stuck = next(r for r in rules if r["alert"] == "SupOutboxStuck")
    assert stuck["expr"] == "max(sup_outbox_oldest_age_seconds) > 900"
