"""The SSH gateway (settings key `gateway`; docs/ssh-gateway.md, "Settings").

Absent (the default): there is no gateway and login pods never sleep, everything as before. Present:
`sup gateway` reads its keys, and SUP's own side reads `idle_seconds`, `max_awake_hours` and
`heartbeat_seconds` (whether and when login pods sleep) and serves /api/v1/gateway/*.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from sup.common.sections import Section
from sup.config.api import RateLimit

PUBLIC_HOST = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")
"""host[:port] as ssh's ProxyJump takes it; `sup ssh login` (sup/ssh_login.py) checks the same shape
before it writes the value into a person's ssh config."""


class GatewaySettings(Section):
    """The SSH gateway (settings key `gateway`; docs/ssh-gateway.md): `sup gateway`, the cluster's one
    SSH jump host into the login pods, and SUP's side of it: the endpoints it calls and whether login
    pods sleep. `sup gateway` reads every key; SUP itself reads `idle_seconds`, `max_awake_hours`,
    `heartbeat_seconds` and `api_rate_limit`.

    - Without a `gateway` section nothing changes: no gateway, and every login pod runs (replicas 1).
      `gateway: {}` enables the gateway's endpoints with the defaults, and pods still never sleep:
      only `idle_seconds` makes them sleep. The gateway authenticates to SUP with a token of role
      `gateway` (`sup token create --name gateway --role gateway`), which may call /api/v1/gateway/*
      and nothing else.
    - With `idle_seconds`, each scheduled (full) pass puts to sleep the login pods nobody used for
      that long: no session in a live heartbeat, no busy answer from the idle reporter. A pod SUP sees
      for the first time counts as used at that moment, so turning the setting on stops no pod before
      `idle_seconds` have passed. Sleeping changes the StatefulSet's `replicas` only: the home claim,
      the pod's Service, NetworkPolicy and login files stay. `sup plan` shows a sleep as an update of
      `spec.replicas`.
    - With `idle_seconds`, login pods also run the idle reporter on `idle_port` (env `SUP_IDLE_PORT`,
      a port `idle` on the pod's Service; docs/ssh-gateway.md, "The idle reporter"): turning
      `idle_seconds` on or off updates every login StatefulSet (the pods restart) and Service once.
      The login image must have it (`sup-login-idle` and socat, in SUP's image since the reporter
      exists); an older image ignores `SUP_IDLE_PORT`, its pods answer nothing and count as busy until
      `max_awake_hours` after their wake (forever without it).
    - The gateway's writes (heartbeats, wakes, login events) have their own limit per client,
      `api_rate_limit`; `api.rate_limit` does not apply to them, nor do they spend a client's admin
      budget. Login events have a budget of their own of that size: a flood of logins that runs it
      out (429) never makes a wake or a heartbeat wait.
    - What a person may forward through the gateway is not a gateway setting: the inner connection
      ends at the login pod's sshd, so it is `kube.ssh_tcp_forwarding` and `kube.ssh_agent_forwarding`.
      The gateway's own connection refuses every forwarding and agent request.
    """

    listen_port: int = Field(
        2222,
        ge=1,
        le=65535,
        description="the port `sup gateway` listens on, in the container (the chart's Service maps 22 to it)",
    )
    host_key_secret: str = Field(
        "sup-gateway-host-key",
        min_length=1,
        description="the Secret holding the gateway's host key, ssh_host_ed25519_key (created once by the "
        "site; the chart mounts it at host_key_file): stable, so people get no host key warnings",
    )
    sup_url: str | None = Field(
        None,
        description="how `sup gateway` reaches SUP; the chart sets SUP's in-cluster Service",
        examples=["http://sup:8080"],
    )
    sup_ca_file: str | None = Field(
        None,
        min_length=1,
        description="PEM CA bundle an https:// sup_url is verified against (always verified; null: the CA "
        "bundle httpx ships); refused with an http:// sup_url",
    )
    token_file: str | None = Field(
        None,
        description="a file holding a SUP API token of role `gateway` (the chart sets where it mounts "
        "gateway.tokenSecret)",
    )
    route_cache_seconds: float = Field(
        5,
        ge=0,
        le=300,
        description="one person's route is reused this long (a suspension holds at the gateway within it)",
    )
    route_recheck_seconds: float = Field(
        30,
        ge=1,
        le=3600,
        description="how often the routes of held tunnels are asked again: a tunnel whose route is gone "
        "(suspended, left a group) is cut within this plus route_cache_seconds",
    )
    max_connections: int = Field(
        1000,
        ge=1,
        description="open connections per process: more get 'gateway busy', more than twice as many are "
        "closed without a handshake",
    )
    max_new_per_second: float = Field(
        100, gt=0, description="new connections per second per process before 'busy'"
    )
    max_connections_per_source: int = Field(
        200,
        ge=1,
        description="open connections from one source address per process before 'busy' (more than twice "
        "as many: closed without a handshake), so that one address cannot make the gateway busy for all",
    )
    max_unauthenticated_per_source: int = Field(
        50, ge=1, description="of them, connections not authenticated yet (in the login grace)"
    )
    max_new_per_second_per_source: float = Field(
        20, gt=0, description="new connections per second from one source address per process"
    )
    new_burst_per_source: int = Field(
        60, ge=1, description="new connections one source address may open at once (its bucket's size)"
    )
    source_ipv6_prefix: int = Field(
        64,
        ge=32,
        le=128,
        description="an IPv6 source address counts as its network of this prefix length (a host holds a /64)",
    )
    max_sessions_per_person: int = Field(20, ge=1, description="tunnels one person may hold")
    max_auth_tries: int = Field(6, ge=1, le=100, description="keys tried per connection before a disconnect")
    login_grace_seconds: float = Field(30, gt=0, le=600, description="time to authenticate")
    wake_timeout_seconds: float = Field(
        60, gt=0, le=3600, description="how long opening a tunnel waits for a sleeping pod to start"
    )
    wake_banner: bool = Field(
        True,
        description="'Starting your login pod' when the person's key is right and their pod asleep (so it "
        "tells a key holder that the pod sleeps)",
    )
    idle_seconds: int | None = Field(
        None,
        ge=1,
        description="idle time before a login pod sleeps (replicas 0); null: pods never sleep",
    )
    max_awake_hours: float | None = Field(
        None,
        gt=0,
        description="a pod whose idle reporter is silent sleeps this long after its wake; null: such a "
        "pod counts as busy and stays awake",
    )
    idle_port: int = Field(
        9101,
        ge=1,
        le=65535,
        description="the idle reporter's port in a login pod (env SUP_IDLE_PORT, port `idle` of its Service)",
    )
    heartbeat_seconds: float = Field(
        15,
        ge=1,
        le=600,
        description="how often `sup gateway` reports its sessions to SUP; a replica silent for 3 "
        "intervals is ignored",
    )
    workers: int = Field(
        2,
        ge=1,
        le=64,
        description="processes sharing the port (the parent binds it, as `sup serve --workers`)",
    )
    api_rate_limit: RateLimit = Field(
        default_factory=lambda: RateLimit(requests_per_second=200, burst=1000),
        description="SUP's write limit on /api/v1/gateway per client (the gateway sends a login event per "
        "connection), counted twice: for login events, and for wakes and heartbeats",
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
        description="a login pod's host from its route ({service}, {namespace}, {name}, {kind} are filled "
        "in; checked at start); the port is the route's (kube.ssh_port for a headless login Service)",
    )
    public_host: str | None = Field(
        None,
        description="the gateway's address as people type it, `host` or `host:port` (`[v6]:port`): the "
        "help text, and the ssh config `sup ssh login` writes",
        examples=["login.cluster.example", "login.cluster.example:2222"],
    )
    metrics_port: int | None = Field(
        9102,
        ge=1,
        le=65535,
        description="Prometheus /metrics port of `sup gateway`; null: no metrics endpoint",
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

    @field_validator("public_host")
    @classmethod
    def _host_and_port(cls, value: str | None) -> str | None:
        """It is written into people's ssh config: a name and a port, nothing more."""
        if value is None:
            return None
        found = PUBLIC_HOST.match(value)
        port = int(value.rsplit(":", 1)[1]) if found and value.rsplit("]", 1)[-1].count(":") == 1 else None
        if found is None or (port is not None and not 0 < port < 65536):
            raise ValueError(f"public_host must be host or host:port ([v6]:port), not {value!r}")
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
