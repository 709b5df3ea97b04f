"""Prometheus metrics of the SCIM service (HTTP-level ones by route template: sup/api/middleware.py)."""

from __future__ import annotations

from prometheus_client import Counter

SCIM_REQUESTS = Counter(
    "sup_scim_requests_total",
    "SCIM requests by connection (the token's name: one per identity provider), operation and status",
    ["connection", "operation", "status"],
)
