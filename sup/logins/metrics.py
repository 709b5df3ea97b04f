"""SUP's side of the gateway as Prometheus metrics (on `sup serve`'s /metrics): login pods put to
sleep by the scheduled pass, woken through the gateway, and awake now. The gateway's own metrics
(connections, wake and connect latencies, sessions) are on `sup gateway`'s metrics port."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

SLEEPS = Counter("sup_login_pod_sleeps_total", "Login pods put to sleep by the scheduled pass", ["kind"])
WAKES = Counter("sup_login_pod_wakes_total", "Login pods woken through the gateway", ["kind"])
AWAKE = Gauge("sup_login_pods_awake", "Login pods awake after the last sleep step", ["kind"])
