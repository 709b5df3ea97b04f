"""`sup gateway`: the SSH jump host in front of the login pods (docs/ssh-gateway.md).

routes.py      what SUP says a person may reach (GET /api/v1/gateway/routes/{username}), cached per person
limits.py      admission (per process and per source address), tunnels per person, refusal events per source
relay.py       a `direct-tcpip` channel relayed to a login pod's sshd, with flow control both ways
texts.py       what a person sees: help on a session channel, banner, open failures, "gateway busy"
connection.py  one SSH connection: publickey only, the route, channel opens
recheck.py     held tunnels whose route is gone (suspended, left a group) are cut
server.py      the listening gateway: host key, shared state, heartbeats, start and stop
metrics.py     Prometheus metrics

It holds no Kubernetes credential and no person's private key: only its host key and a SUP API token
of role `gateway`. It reaches SUP over HTTP only (an import contract in pyproject.toml): of SUP's
code it uses the domain's pure rules, its settings section (sup/config/gateway.py), sup.common,
sup.logs and sup.errors. SUP's side, the endpoints it calls, is sup/logins. Its loggers are
`sup.gateway.*`.
"""

from __future__ import annotations

from sup.domain.login_pods import PodRoute
from sup.gateway.routes import NoRoute, PersonRoute, SupApi
from sup.gateway.server import Gateway, PodAddress, template_address

__all__ = ["Gateway", "NoRoute", "PersonRoute", "PodAddress", "PodRoute", "SupApi", "template_address"]
