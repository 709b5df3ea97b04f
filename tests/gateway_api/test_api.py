"""/api/v1/gateway/* on SQLite and PostgreSQL: routes, wake, heartbeat, events and sessions, and what
a token of role `gateway` may not do."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.domain.sshkeys import parse_ssh_public_key
from sup.logins import service
from sup.store.models import AuditEntry, GatewayHeartbeat, LoginWake, SshKey, User, utcnow
from tests.conftest import bearer
from tests.gateway_api.conftest import NAMESPACE, FakeCluster
from tests.support import keys

KIM_KEY = keys.ed25519_key("kim@laptop")


def fingerprint(line: str) -> str:
    return parse_ssh_public_key(line).fingerprint


@pytest.fixture
def gateway(tokens: dict[str, str]) -> dict[str, str]:
    return bearer(tokens["gateway"])


@pytest.fixture
def world(client: TestClient, admin: dict[str, str]) -> None:
    """kim (a key, in physics, which has a group pod), saul (suspended), lee (no key, in chem)."""
    client.post("/api/v1/groups", json={"name": "physics"}, headers=admin)
    client.post("/api/v1/groups", json={"name": "chem"}, headers=admin)
    for body in (
        {"username": "kim", "ssh_public_keys": [KIM_KEY], "groups": ["physics"]},
        {"username": "saul", "ssh_public_keys": [keys.ed25519_key()], "active": False},
        {"username": "lee", "groups": ["chem"]},
    ):
        response = client.post("/api/v1/users", json=body, headers=admin)
        assert response.status_code == 201, response.text


@pytest.mark.usefixtures("world")
def test_routes_of_a_person_own_pod_first_then_group_pods(
    client: TestClient, gateway: dict[str, str]
) -> None:
    response = client.get("/api/v1/gateway/routes/kim", headers=gateway)
    assert response.status_code == 200, response.text
    # the login Services are headless (kube.service_type ClusterIP): their names resolve to the pods'
    # own addresses, where sshd listens on kube.ssh_port
    common = {"namespace": NAMESPACE, "port": 2222, "awake": True}
    assert response.json() == {
        "username": "kim",
        "fingerprints": [fingerprint(KIM_KEY)],
        "certificate_authorities": [],  # the site signs no SSH certificates
        "pods": [
            {"name": "login", "kind": "user", "owner": "kim", "service": "login-kim", **common},
            {"name": "physics", "kind": "group", "owner": "physics", "service": "group-physics", **common},
        ],
    }
    lee = client.get("/api/v1/gateway/routes/lee", headers=gateway).json()
    assert lee["fingerprints"] == [] and [p["name"] for p in lee["pods"]] == ["login"]


@pytest.mark.usefixtures("world")
def test_a_routes_port_is_the_one_its_services_name_answers_on(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    """A headless Service's name is the pod's address: sshd's port (kube.ssh_port); a NodePort or
    LoadBalancer Service keeps a ClusterIP, whose name answers on the Service's port."""
    base = settings.kube
    assert base is not None

    def ports(**kube: object) -> set[int]:
        changed = settings.model_copy(update={"kube": base.model_copy(update=kube)})
        with sessions() as session:
            found = service.routes(session, changed, "kim")
        assert isinstance(found, service.Routes), found
        return {pod.port for pod in found.pods}

    assert ports() == {2222}
    assert ports(ssh_port=2200, service_port=2022) == {2200}
    assert ports(service_type="NodePort", ssh_port=2200, service_port=2022) == {2022}
    assert ports(service_type="LoadBalancer") == {22}


@pytest.mark.usefixtures("world")
def test_no_route_has_one_shape_and_a_reason_for_the_audit(
    client: TestClient, gateway: dict[str, str]
) -> None:
    for username, reason in (("nobody", "unknown"), ("saul", "inactive")):
        response = client.get(f"/api/v1/gateway/routes/{username}", headers=gateway)
        assert response.status_code == 404
        assert response.json() == {"detail": "no route", "reason": reason}


def _wakes(client: TestClient) -> float:
    """sup_login_pod_wakes_total{kind="user"} as /metrics shows it (0 before the first)."""
    for line in client.get("/metrics").text.splitlines():
        if line.startswith('sup_login_pod_wakes_total{kind="user"} '):
            return float(line.split()[-1])
    return 0.0


@pytest.mark.usefixtures("world")
def test_a_sleeping_pod_is_routed_asleep_and_a_wake_wakes_it_once(
    client: TestClient, gateway: dict[str, str], sessions: sessionmaker[Session], cluster: FakeCluster
) -> None:
    long_ago = utcnow() - timedelta(hours=3)
    cluster.replicas["login-kim"] = 0
    with sessions.begin() as session:
        session.add(
            LoginWake(kind="user", name="kim", awake=False, woken_at=long_ago, last_activity=long_ago)
        )
    pods = client.get("/api/v1/gateway/routes/kim", headers=gateway).json()["pods"]
    assert [(p["name"], p["awake"]) for p in pods] == [("login", False), ("physics", True)]

    wakes_before = _wakes(client)
    for _ in range(3):  # many connections at once: one write
        response = client.post("/api/v1/gateway/wake", json={"kind": "user", "name": "kim"}, headers=gateway)
        assert response.status_code == 200, response.text
        assert response.json() == {"awake": True}
    assert cluster.writes == ["login-kim"]
    assert _wakes(client) == wakes_before + 1  # on /metrics: one wake, not three
    pods = client.get("/api/v1/gateway/routes/kim", headers=gateway).json()["pods"]
    assert pods[0]["awake"] is True
    with sessions() as session:
        row = session.get(LoginWake, ("user", "kim"))
        assert row is not None and row.awake and row.last_activity is not None
        assert row.last_activity > long_ago and row.woken_at is not None and row.woken_at > long_ago
        wakes = session.scalars(select(AuditEntry).where(AuditEntry.action == "wake")).all()
    assert [(w.resource_type, w.resource_name, w.actor) for w in wakes] == [
        ("gateway", "user/kim", "gateway-token")
    ]


@pytest.mark.usefixtures("world")
def test_wake_of_a_pod_sup_does_not_keep_is_404(
    client: TestClient, gateway: dict[str, str], cluster: FakeCluster
) -> None:
    for body in (
        {"kind": "user", "name": "saul"},
        {"kind": "group", "name": "chem"},
        {"kind": "user", "name": "x"},
    ):
        assert client.post("/api/v1/gateway/wake", json=body, headers=gateway).status_code == 404
    assert cluster.writes == []
    response = client.post("/api/v1/gateway/wake", json={"kind": "group", "name": "physics"}, headers=gateway)
    assert response.status_code == 200 and cluster.writes == []  # at one replica already


def _heartbeat(replica: str, *sessions: tuple[str, str, str]) -> dict[str, object]:
    return {
        "gateway": replica,
        "sessions": [
            {
                "kind": kind,
                "name": name,
                "username": who,
                "since": "2026-11-24T18:00:00Z",
                "source": "10.0.0.7:51234",
            }
            for kind, name, who in sessions
        ],
        "busy": [{"kind": "user", "name": "kim", "busy": None}],
    }


@pytest.mark.usefixtures("world")
def test_heartbeats_tell_who_is_connected_until_they_go_stale(
    client: TestClient, gateway: dict[str, str], viewer: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    beat = _heartbeat("gw-a", ("user", "kim", "kim"), ("group", "physics", "kim"))
    assert client.post("/api/v1/gateway/heartbeat", json=beat, headers=gateway).status_code == 204
    beat = _heartbeat("gw-b", ("user", "lee", "lee"))
    assert client.post("/api/v1/gateway/heartbeat", json=beat, headers=gateway).status_code == 204
    # a newer report of gw-b replaces its last one
    assert (
        client.post("/api/v1/gateway/heartbeat", json=_heartbeat("gw-b"), headers=gateway).status_code == 204
    )

    listed = client.get("/api/v1/gateway/sessions", headers=viewer)
    assert listed.status_code == 200
    assert [(s["gateway"], s["kind"], s["name"], s["username"]) for s in listed.json()] == [
        ("gw-a", "group", "physics", "kim"),
        ("gw-a", "user", "kim", "kim"),
    ]
    assert listed.json()[0]["source"] == "10.0.0.7:51234"

    with sessions.begin() as session:  # gw-a falls silent for three intervals (15 s each)
        row = session.get(GatewayHeartbeat, "gw-a")
        assert row is not None
        row.at = utcnow() - timedelta(seconds=46)
    assert client.get("/api/v1/gateway/sessions", headers=viewer).json() == []


@pytest.mark.usefixtures("world")
def test_events_go_to_the_audit_log(
    client: TestClient, gateway: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    login = {
        "event": "login",
        "username": "kim",
        "fingerprint": fingerprint(KIM_KEY),
        "source": "10.0.0.7:1",
        "pod": "login",
    }
    refused = {
        "event": "refused",
        "username": "mallory",
        "fingerprint": None,
        "source": "10.0.0.9:2",
        "reason": "unknown",
    }
    for body in (login, refused):
        assert client.post("/api/v1/gateway/events", json=body, headers=gateway).status_code == 204
    bad = {**refused, "reason": "because"}
    assert client.post("/api/v1/gateway/events", json=bad, headers=gateway).status_code == 422
    with sessions() as session:
        entries = session.scalars(
            select(AuditEntry).where(AuditEntry.resource_type == "gateway").order_by(AuditEntry.id)
        ).all()
    assert [(e.action, e.resource_name, e.actor) for e in entries] == [
        ("login", "kim", "gateway-token"),
        ("refused", "mallory", "gateway-token"),
    ]
    assert entries[0].after == {
        "fingerprint": fingerprint(KIM_KEY),
        "source": "10.0.0.7:1",
        "reason": None,
        "pod": "login",
    }
    assert KIM_KEY.split()[1] not in str(entries[0].after)


def test_a_gateway_token_writes_no_audit_entry_of_another_kind(
    client: TestClient, gateway: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    """The gateway's events are its own three kinds, about the gateway: a stolen token cannot put a
    wake, a sleep, a user's change or a made-up kind into the audit log (422, nothing written)."""
    forged = {"username": "kim", "source": "10.0.0.7:1"}
    for event in ("wake", "sleep", "update", "delete", "gateway.login", "login\n"):
        answer = client.post("/api/v1/gateway/events", json={**forged, "event": event}, headers=gateway)
        assert answer.status_code == 422, (event, answer.text)
    extra = {**forged, "event": "login", "resource_type": "user", "action": "delete"}
    assert client.post("/api/v1/gateway/events", json=extra, headers=gateway).status_code == 422
    with sessions() as session:
        assert session.scalars(select(AuditEntry).where(AuditEntry.actor == "gateway-token")).all() == []


@pytest.mark.usefixtures("world")
def test_a_gateway_token_may_call_the_gateway_only(client: TestClient, gateway: dict[str, str]) -> None:
    for method, path in (
        ("GET", "/api/v1/users"),
        ("GET", "/api/v1/users/kim"),
        ("GET", "/api/v1/groups"),
        ("GET", "/api/v1/audit"),
        ("GET", "/api/v1/plan"),
        ("GET", "/api/v1/tokens"),
        ("GET", "/api/v1/gateway/sessions"),
        ("GET", "/scim/v2/Users"),
    ):
        response = client.request(method, path, headers=gateway)
        assert response.status_code == 403, (path, response.text)


@pytest.mark.usefixtures("world")
def test_only_gateway_and_admin_tokens_may_call_the_gateway(
    client: TestClient, tokens: dict[str, str], cluster: FakeCluster
) -> None:
    calls = (
        ("GET", "/api/v1/gateway/routes/kim", None),
        ("POST", "/api/v1/gateway/wake", {"kind": "user", "name": "kim"}),
        ("POST", "/api/v1/gateway/heartbeat", _heartbeat("gw-a")),
        ("POST", "/api/v1/gateway/events", {"event": "refused", "username": "x", "source": "1.2.3.4:5"}),
    )
    for method, path, body in calls:
        assert client.request(method, path, json=body).status_code == 401
        for role in ("viewer", "operator", "scim"):
            response = client.request(method, path, json=body, headers=bearer(tokens[role]))
            assert response.status_code == 403, (role, path, response.text)
            assert "this needs gateway" in response.json()["detail"]
        response = client.request(method, path, json=body, headers=bearer(tokens["admin"]))
        assert response.status_code in (200, 204), (path, response.text)


def test_gateway_tokens_are_created_by_the_api(client: TestClient, admin: dict[str, str]) -> None:
    response = client.post("/api/v1/tokens", json={"name": "gw", "role": "gateway"}, headers=admin)
    assert response.status_code == 201 and response.json()["role"] == "gateway"
    token = bearer(response.json()["token"])
    assert client.get("/api/v1/gateway/routes/nobody", headers=token).status_code == 404
    assert client.get("/api/v1/users", headers=token).status_code == 403


@pytest.mark.usefixtures("world")
def test_a_stored_key_a_login_pod_leaves_out_is_no_key_at_the_gateway(
    client: TestClient, gateway: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    # Stored before the API refused bidi comments: the pod's keys file leaves it out
    # (sup/targets/kube/login_files.py), so the gateway must not let it through either.
    hidden = parse_ssh_public_key(keys.ed25519_key())
    with sessions.begin() as session:
        kim = session.scalars(select(User).where(User.username == "kim")).one()
        kim.ssh_keys.append(
            SshKey(
                key_type=hidden.key_type,
                key_data=hidden.blob,
                comment="kim@\u202epotpal",
                fingerprint=hidden.fingerprint,
                origin="admin",
            )
        )
    response = client.get("/api/v1/gateway/routes/kim", headers=gateway)
    assert response.status_code == 200, response.text
    assert response.json()["fingerprints"] == [fingerprint(KIM_KEY)]


@pytest.mark.usefixtures("world")
def test_a_gateway_token_reads_one_persons_fingerprints_by_name_and_no_list_of_them(
    client: TestClient, gateway: dict[str, str], admin: dict[str, str]
) -> None:
    """Every GET the app serves, asked with a gateway token: only the per-name routes lookup and the
    awake pods answer among the API's paths, and no answer holds the fingerprint of anyone but the
    person asked for (a stolen token does not dump the key list; it can ask name by name)."""
    ann_key = keys.ed25519_key("ann@laptop")
    assert (
        client.post(
            "/api/v1/users", json={"username": "ann", "ssh_public_keys": [ann_key]}, headers=admin
        ).status_code
        == 201
    )
    others = {fingerprint(ann_key)}
    answered: dict[str, str] = {}
    paths = client.get("/openapi.json").json()["paths"]  # every path the app routes, with its methods
    assert "/api/v1/users" in paths and "/api/v1/gateway/awake" in paths
    for template, methods in paths.items():
        if "get" not in methods:
            continue
        response = client.get(re.sub(r"\{(\w+)(:path)?\}", "kim", template), headers=gateway)
        if response.status_code < 300:
            answered[template] = response.text
    api = {path for path in answered if path.startswith("/api/")}  # SCIM's discovery is public
    assert api == {"/api/v1/gateway/routes/{username}", "/api/v1/gateway/awake"}
    assert fingerprint(KIM_KEY) in answered["/api/v1/gateway/routes/{username}"]
    for path, body in answered.items():
        assert not any(other in body for other in others), path


@pytest.mark.usefixtures("world")
def test_one_persons_login_pods_and_sessions_for_people_to_read(
    client: TestClient, gateway: dict[str, str], viewer: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    """What the admin page's person view shows: the pods (asleep or awake) and that person's sessions
    only; why a person has none; 404 for nobody; a viewer may read it, the gateway's token may not."""
    with sessions.begin() as session:
        session.add(LoginWake(kind="user", name="kim", awake=False, woken_at=None, last_activity=None))
    beat = _heartbeat("gw-a", ("user", "kim", "kim"), ("user", "lee", "lee"))
    assert client.post("/api/v1/gateway/heartbeat", json=beat, headers=gateway).status_code == 204

    kim = client.get("/api/v1/gateway/people/kim", headers=viewer)
    assert kim.status_code == 200, kim.text
    body = kim.json()
    assert [(p["name"], p["kind"], p["awake"]) for p in body["pods"]] == [
        ("login", "user", False), ("physics", "group", True),
    ]  # fmt: skip
    assert body["reason"] is None
    assert [(s["gateway"], s["name"], s["username"]) for s in body["sessions"]] == [("gw-a", "kim", "kim")]

    saul = client.get("/api/v1/gateway/people/saul", headers=viewer).json()
    assert saul["pods"] == [] and saul["reason"] == "inactive" and saul["sessions"] == []
    assert client.get("/api/v1/gateway/people/nobody", headers=viewer).status_code == 404
    assert client.get("/api/v1/gateway/people/kim", headers=gateway).status_code == 403
