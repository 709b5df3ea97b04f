"""The SSH gateway (settings key `gateway`; docs/ssh-gateway.md, "Settings").

Absent (the default): there is no gateway and login pods never sleep, everything as before. Present:
`sup gateway` reads its keys, and SUP's own side reads `idle_seconds`, `max_awake_hours` and
`heartbeat_seconds` (whether and when login pods sleep) and serves /api/v1/gateway/*.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from sup.common.sections import Section
from sup.config.api import RateLimit


class GatewaySettings(Section):
    listen_port: int = Field(2222, ge=1, le=65535, description="port in the container (the Service maps 22)")
    host_key_secret: str = Field(
        "sup-gateway-host-key", min_length=1, description="Secret holding ssh_host_ed25519_key"
    )
    sup_url: str | None = Field(None, description="how the gateway reaches SUP; default: in-cluster Service")
    sup_ca_file: str | None = Field(
        None,
        min_length=1,
        description="PEM CA bundle the gateway checks an https sup_url against; none: the usual CAs",
    )
    token_file: str | None = Field(None, description="file with the gateway's API token (role gateway)")
    route_cache_seconds: float = Field(5, ge=0, le=300, description="how long one person's route is reused")
    route_recheck_seconds: float = Field(
        30, ge=1, le=3600, description="how often the routes of held tunnels are asked again"
    )
    max_connections: int = Field(1000, ge=1, description="open connections per process before 'busy'")
    max_new_per_second: float = Field(100, gt=0, description="new connections per second per process")
    max_connections_per_source: int = Field(
        200, ge=1, description="open connections from one source address per process before 'busy'"
    )
    max_unauthenticated_per_source: int = Field(
        50, ge=1, description="of them, connections not yet authenticated (in the login grace)"
    )
    max_new_per_second_per_source: float = Field(
        20, gt=0, description="new connections per second from one source address per process"
    )
    new_burst_per_source: int = Field(
        60, ge=1, description="new connections one source address may open at once (its bucket's size)"
    )
    source_ipv6_prefix: int = Field(
        64, ge=32, le=128, description="IPv6 sources are counted by this network prefix (a host holds a /64)"
    )
    max_sessions_per_person: int = Field(20, ge=1, description="tunnels one person may hold")
    max_auth_tries: int = Field(6, ge=1, le=100, description="keys tried per connection")
    login_grace_seconds: float = Field(30, gt=0, le=600, description="time to authenticate")
    wake_timeout_seconds: float = Field(60, gt=0, le=3600, description="bounded wait for a sleeping pod")
    wake_banner: bool = Field(True, description="tell a person whose pod is asleep that it is starting")
    idle_seconds: int | None = Field(
        None,
        ge=1,
        description="idle time before a login pod sleeps (replicas 0); none: pods never sleep",
    )
    max_awake_hours: float | None = Field(
        None, gt=0, description="a pod whose idle reporter is silent sleeps this long after its wake"
    )
    idle_port: int = Field(9101, ge=1, le=65535, description="the idle reporter's port in the login pod")
    heartbeat_seconds: float = Field(
        15, ge=1, le=600, description="session report interval; a replica silent for 3 is ignored"
    )
    workers: int = Field(2, ge=1, le=64, description="processes sharing the port")
    api_rate_limit: RateLimit = Field(
        default_factory=lambda: RateLimit(requests_per_second=200, burst=1000),
        description="SUP's write limit on /api/v1/gateway per client (a login event per connection)",
    )
    # The server's own keys (`sup gateway`).
    listen_host: str = Field("0.0.0.0", min_length=1, description="address `sup gateway` listens on")  # noqa: S104
    host_key_file: str = Field(
        "/etc/sup/gateway/ssh_host_ed25519_key",
        min_length=1,
        description="the gateway's host key (the chart mounts the host_key_secret Secret here)",
    )
    pod_address: str = Field(
        "{service}.{namespace}.svc",
        min_length=1,
        description="host a login pod is reached at; {service}, {namespace}, {name}, {kind} are filled in",
    )
    public_host: str | None = Field(
        None,
        description="the gateway's address as people type it, for the help text (e.g. login.cluster.example)",
    )
    metrics_port: int | None = Field(
        9102,
        ge=1,
        le=65535,
        description="Prometheus /metrics port of `sup gateway`; none: no metrics endpoint",
    )
    metrics_host: str = Field(
        "127.0.0.1",
        min_length=1,
        description="address /metrics listens on; the chart sets the pod's IP (scraped over the pod network)",
    )

    @field_validator("pod_address")
    @classmethod
    def _known_fields(cls, value: str) -> str:
        """A typo in the template fails at start, not at the first connection."""
        try:
            value.format(service="s", namespace="n", name="p", kind="user")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"pod_address may use {{service}}, {{namespace}}, {{name}}, {{kind}} only: {exc}"
            ) from None
        return value

    @model_validator(mode="after")
    def _ca_file_needs_https(self) -> GatewaySettings:
        """A CA bundle with a plain-HTTP sup_url would be ignored: the operator meant TLS."""
        if self.sup_ca_file and self.sup_url and not self.sup_url.lower().startswith("https://"):
            raise ValueError(
                f"sup_ca_file is set but sup_url {self.sup_url!r} is not https://: "
                "the token would go in clear"
            )
        return self

    @property
    def sleeps(self) -> bool:
        """Whether login pods sleep at all (`idle_seconds` set)."""
        return self.idle_seconds is not None
