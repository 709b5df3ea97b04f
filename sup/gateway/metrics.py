"""Prometheus metrics of `sup gateway` (served on `gateway.metrics_port`)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

CONNECTIONS = Counter(
    "sup_gateway_connections_total",
    "SSH connections by outcome: ok (authenticated), refused, busy (disconnected), dropped (no handshake)",
    ["result"],
)
REFUSALS = Counter("sup_gateway_refusals_total", "Refused logins and tunnel opens, by reason", ["reason"])
CUTS = Counter(
    "sup_gateway_tunnels_cut_total",
    "Held tunnels closed because SUP no longer routes the person to their pod, by SUP's reason",
    ["reason"],
)
SESSIONS = Gauge("sup_gateway_sessions", "Tunnels to login pods open now")
CONNECT_SECONDS = Histogram(
    "sup_gateway_connect_seconds",
    "Tunnel open requested to login pod connected (includes any wake)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120),
)
WAKE_SECONDS = Histogram(
    "sup_gateway_wake_seconds",
    "Wake requested to login pod reachable",
    buckets=(0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 120),
)
RELAY_BYTES = Counter("sup_gateway_relay_bytes_total", "Bytes relayed, by direction", ["direction"])
RELAY_BUFFERED = Gauge(
    "sup_gateway_relay_buffered_bytes",
    "Bytes the relay holds now, waiting for a slow side (flow control bounds it)",
)
IDLE_POLLS = Counter(
    "sup_gateway_idle_polls_total",
    "Idle reporters asked, by answer: busy (processes running), idle (none), silent (no answer in "
    "time), bad (an answer that is not a count)",
    ["result"],
)
