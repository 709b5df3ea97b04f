"""The gateway against a real `sup serve` (its /api/v1/gateway endpoints, a `gateway` token made
with the CLI) and a real kube-apiserver holding the login StatefulSets; OpenSSH's own client
through it, and a real sshd standing in for the login pod (no node runs pods here: the real-node
tests are in tests/e2e).

What it shows end to end: the person SUP knows, with the key SUP knows, lands in the pod; another
key and a suspended person are refused; SUP's audit log and sessions list say who came, from where,
to which pod; an idle pod is put to sleep by SUP's pass (replicas 0 on the API server) and the next
connection through the gateway wakes it (replicas 1) and lands; a pod whose idle reporter (the login
image's own, in a PID namespace of its own) sees a process of the person's stays awake while an idle
one sleeps.

One `sup serve` and one namespace serve the module (per `idle_settings`: the test that sets its own
gets its own): starting them is most of a test's setup. Each test gets people of its own (`alice`
and `bob` here are new users with new keys, alice3, bob3, ...) and looks only at what concerns
them: other tests' people stay in the site, awake or asleep."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from sup.domain import sshcerts
from sup.gateway import PodRoute
from sup.targets.kube.names import Owner
from tests.e2e.stack import wait_until
from tests.gateway.scenario import Person
from tests.support.cli import run_sup, sup_env
from tests.support.gateway_runner import RunningGateway
from tests.support.idle_reporter import IdleReporter, ReporterUnavailable
from tests.support.kubeapi import KubeApiServer
from tests.support.ports import free_port
from tests.support.server import SupServer
from tests.support.sshd import SshClient, StandInPod, keygen

IDLE_PORT = 9111  # what SUP's awake answer names; the test's address function maps it to a reporter


@dataclass
class Site:
    server: SupServer
    admin: httpx.Client
    gateway_token: str
    namespace: str
    kubeapi: KubeApiServer
    ca_key: Path  # the SSH CA's private key (ssh_ca.key_file)

    def replicas(self, username: str) -> int | None:
        """The login StatefulSet's replicas on the API server (None: not there yet)."""
        name = Owner("user", username).login
        with self.kubeapi.admin() as api:
            found = api.get(f"/apis/apps/v1/namespaces/{self.namespace}/statefulsets/{name}")
        return None if found is None else int(found["spec"].get("replicas", 1))

    def reconcile_kube(self, timeout: float = 120) -> None:
        """POST /reconcile for the Kubernetes target, waiting while another pass holds the lock
        (409): `sup serve` runs its own passes, e.g. after the users were created."""
        deadline = time.monotonic() + timeout
        while True:
            applied = self.admin.post("/api/v1/reconcile", json={"targets": ["kube"]})
            if applied.status_code != 409 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert applied.status_code == 200, applied.text

    def gateway_reports(self) -> None:
        """An empty heartbeat, as a gateway replica with nobody connected sends: SUP puts pods to
        sleep only while some replica reports."""
        body = {"gateway": "test-replica", "sessions": [], "busy": []}
        headers = {"Authorization": f"Bearer {self.gateway_token}"}
        with httpx.Client(base_url=self.server.url, headers=headers, timeout=60) as client:
            assert client.post("/api/v1/gateway/heartbeat", json=body).status_code == 204

    def audit(self, name: str | None = None) -> list[dict[str, Any]]:
        """The gateway's audit entries (those about `name` only: a person, or user/NAME for a pod)."""
        response = self.admin.get("/api/v1/audit", params={"resource_type": "gateway", "limit": 500})
        response.raise_for_status()
        items: list[dict[str, Any]] = response.json()["items"]
        if name is None:
            return items
        return [e for e in items if e["resource_name"] in (name, f"user/{name}")]


@pytest.fixture(scope="module")
def idle_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The site's `gateway.idle_seconds` and `heartbeat_seconds` (a test may parametrize them)."""
    return dict(getattr(request, "param", {"idle_seconds": 1, "heartbeat_seconds": 1}))


@pytest.fixture(scope="module")
def site(
    tmp_path_factory: pytest.TempPathFactory, kubeapi: KubeApiServer, idle_settings: dict[str, Any]
) -> Iterator[Site]:
    tmp_path = tmp_path_factory.mktemp("site")
    namespace = kubeapi.new_namespace("gw")
    ca_key = tmp_path / "ssh_ca"
    keygen(ca_key, "test-ca")
    config = {
        "database_url": f"sqlite:///{tmp_path / 'sup.db'}",
        "kube": {"namespace": namespace, "kubeconfig": str(kubeapi.admin_kubeconfig)},
        "gateway": {**idle_settings, "idle_port": IDLE_PORT},
        "ssh_ca": {"key_file": str(ca_key)},
    }
    (tmp_path / "sup.yaml").write_text(yaml.safe_dump(config))
    env = sup_env(SUP_CONFIG=str(tmp_path / "sup.yaml"))
    assert run_sup("db", "upgrade", env=env).returncode == 0
    admin = run_sup("token", "create", "--name", "admin", "--role", "admin", env=env).stdout.strip()
    gateway = run_sup("token", "create", "--name", "gateway", "--role", "gateway", env=env).stdout.strip()
    server = SupServer(env, tmp_path / "serve.log")
    client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {admin}"}, timeout=60)
    made = Site(server, client, gateway, namespace, kubeapi, ca_key)
    try:
        yield made
    finally:
        client.close()
        server.stop()


_numbers = itertools.count(1)


def _new_person(site: Site, directory: Path, name: str) -> Person:
    """A user of the site's `sup serve` with a key of their own (SUP holds each key once)."""
    person = Person.make(directory, f"{name}{next(_numbers)}")
    body = {"username": person.name, "ssh_public_keys": [person.public]}
    assert site.admin.post("/api/v1/users", json=body).status_code == 201
    return person


@pytest.fixture
def alice(site: Site, tmp_path: Path) -> Person:
    """This test's alice (the stand-in pod, conftest.py, admits her key)."""
    return _new_person(site, tmp_path, "alice")


@pytest.fixture
def bob(site: Site, tmp_path: Path) -> Person:
    return _new_person(site, tmp_path, "bob")


@pytest.fixture
def gateway(site: Site, host_key: Path, stand_in_pod: StandInPod) -> Iterator[Callable[..., RunningGateway]]:
    """`sup gateway`'s server in process against that `sup serve`, alice's pod at the stand-in's
    sshd (a pod's Service name resolves only inside a cluster)."""
    started: list[RunningGateway] = []

    def make(reporters: dict[str, IdleReporter] | None = None, **settings: Any) -> RunningGateway:
        """`reporters`: the idle reporter of each person's pod (asked at the awake answer's port);
        other tests' people's pods have none (a port nobody listens on: silent)."""
        nobody_listens = free_port()

        def at_stand_in(pod: PodRoute) -> tuple[str, int]:
            assert pod.namespace == site.namespace and pod.service.startswith("login-")
            if pod.port == IDLE_PORT:
                reporter = (reporters or {}).get(pod.owner)
                return "127.0.0.1", nobody_listens if reporter is None else reporter.port
            return "127.0.0.1", stand_in_pod.port

        running = RunningGateway(
            site.server.url, host_key, token=site.gateway_token, address=at_stand_in, **settings
        )
        started.append(running)
        return running

    yield make
    for running in started:
        running.stop()


def test_a_person_lands_in_their_pod_and_sup_knows_who_is_connected(
    site: Site,
    gateway: Callable[..., RunningGateway],
    stand_in_pod: StandInPod,
    alice: Person,
    bob: Person,
    tmp_path: Path,
) -> None:
    wait_until(lambda: site.replicas(alice.name) == 1, 60, "alice's login StatefulSet")
    stand_in_pod.start()
    running = gateway(route_cache_seconds=0.5)

    landed = SshClient(tmp_path, alice.key, running.port).ssh(alice.name, "login", "echo landed")
    assert landed.returncode == 0, landed.stderr
    assert landed.stdout == "landed\n"

    foreign = SshClient(tmp_path, bob.key, running.port).ssh(alice.name, "login", "echo landed")
    assert foreign.returncode == 255
    assert "Permission denied (publickey)" in foreign.stderr

    # a session held open shows in SUP's sessions list, with the pod and the source
    client = SshClient(tmp_path, alice.key, running.port)
    held = client.popen("-J", client.jump(alice.name), "root@login", "sleep 30")

    def sessions() -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = site.admin.get("/api/v1/gateway/sessions").json()
        return [s for s in listed if alice.name in (s["name"], s["username"])]

    try:
        wait_until(lambda: bool(sessions()), 60, "alice's session")
        mine = sessions()
        assert [(s["kind"], s["name"], s["username"]) for s in mine] == [("user", alice.name, alice.name)]
        assert mine[0]["source"].startswith("127.0.0.1:")
    finally:
        held.kill()
        held.wait()

    wait_until(lambda: len(site.audit(alice.name)) >= 2, 60, "the gateway's audit entries")
    audit = site.audit()
    seen = {(e["action"], e["resource_name"], (e["after"] or {}).get("reason")) for e in audit}
    assert ("login", alice.name, None) in seen
    assert ("refused", alice.name, "wrong_key") in seen
    assert not any(alice.public.split()[1] in str(e) or bob.public.split()[1] in str(e) for e in audit)

    # suspended: refused at the gateway once the route cache has passed, the same way as a wrong key
    assert site.admin.patch(f"/api/v1/users/{alice.name}", json={"active": False}).status_code == 200
    time.sleep(1)
    suspended = SshClient(tmp_path, alice.key, running.port).ssh(alice.name, "login", "echo landed")
    assert suspended.returncode == 255
    assert "Permission denied (publickey)" in suspended.stderr


def test_an_idle_pod_sleeps_and_the_next_connection_wakes_it(
    site: Site,
    gateway: Callable[..., RunningGateway],
    stand_in_pod: StandInPod,
    alice: Person,
    bob: Person,
    tmp_path: Path,
) -> None:
    wait_until(lambda: site.replicas(alice.name) == 1, 60, "alice's login StatefulSet")
    # A full pass first sees the pods (in use from then on), the next one after idle_seconds (1)
    # with nobody connected (a gateway replica reporting no session) puts them to sleep.
    site.reconcile_kube()
    deadline = time.monotonic() + 60
    while site.replicas(alice.name) != 0 or site.replicas(bob.name) != 0:
        assert time.monotonic() < deadline, "the idle pods were never put to sleep"
        time.sleep(1.5)
        site.gateway_reports()
        site.reconcile_kube()
    assert site.replicas(alice.name) == 0
    assert site.replicas(bob.name) == 0
    stand_in_pod.start()
    running = gateway()

    landed = SshClient(tmp_path, alice.key, running.port).ssh(alice.name, "login", "echo landed")

    assert landed.returncode == 0, landed.stderr
    assert landed.stdout == "landed\n"
    assert site.replicas(alice.name) == 1  # woken through SUP, at once
    assert site.replicas(bob.name) == 0
    actions = [(e["action"], e["resource_name"]) for e in site.audit(alice.name)]
    assert ("sleep", f"user/{alice.name}") in actions and ("wake", f"user/{alice.name}") in actions, actions


@pytest.fixture
def reporters(alice: Person, bob: Person) -> Iterator[dict[str, IdleReporter]]:
    """An idle reporter for alice's pod and one for bob's, by their names."""
    started: dict[str, IdleReporter] = {}
    try:
        for name in (alice.name, bob.name):
            started[name] = IdleReporter().start()
    except ReporterUnavailable as exc:
        for reporter in started.values():
            reporter.stop()
        pytest.skip(str(exc))
    yield started
    for reporter in started.values():
        reporter.stop()


def test_a_pod_whose_person_left_something_running_stays_awake_while_an_idle_one_sleeps(
    site: Site,
    gateway: Callable[..., RunningGateway],
    reporters: dict[str, IdleReporter],
    alice: Person,
    bob: Person,
) -> None:
    wait_until(
        lambda: site.replicas(alice.name) == 1 and site.replicas(bob.name) == 1, 60, "the login StatefulSets"
    )
    reporters[alice.name].run_as_person()  # alice's tmux, say; nothing runs in bob's pod
    running = gateway(reporters=reporters)
    site.reconcile_kube()  # first sight: both awake and in use now; SUP names them to ask from here on

    expected = [
        {"kind": "user", "name": alice.name, "busy": True},
        {"kind": "user", "name": bob.name, "busy": False},
    ]

    def theirs(busy: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [entry for entry in busy if entry["name"] in (alice.name, bob.name)]

    wait_until(
        lambda: any(theirs(b["busy"]) == expected for b in running.heartbeats()), 60, "the reporters' answers"
    )
    # passes until bob's idle_seconds (1) are over: bob sleeps, alice's busy pod never does
    deadline = time.monotonic() + 60
    while site.replicas(bob.name) != 0:
        assert time.monotonic() < deadline, "bob's idle pod was never put to sleep"
        assert site.replicas(alice.name) == 1
        site.reconcile_kube()
        time.sleep(0.5)
    assert site.replicas(alice.name) == 1
    actions = [(e["action"], e["resource_name"]) for e in site.audit()]
    assert ("sleep", f"user/{bob.name}") in actions and ("sleep", f"user/{alice.name}") not in actions, (
        actions
    )

    # alice's process ends: her pod is idle now, and sleeps too
    reporters[alice.name].stop_persons_processes()
    deadline = time.monotonic() + 60
    while site.replicas(alice.name) != 0:
        assert time.monotonic() < deadline, "alice's pod was never put to sleep once idle"
        site.reconcile_kube()
        time.sleep(0.5)


def test_a_held_session_is_cut_when_the_person_is_suspended(
    site: Site,
    gateway: Callable[..., RunningGateway],
    stand_in_pod: StandInPod,
    alice: Person,
    tmp_path: Path,
) -> None:
    """Access removed, sessions end: alice holds a shell through the gateway, an admin suspends her
    in SUP, the gateway's next route recheck cuts the tunnel (OpenSSH prints why) and SUP's audit
    log holds the cut."""
    wait_until(lambda: site.replicas(alice.name) == 1, 60, "alice's login StatefulSet")
    stand_in_pod.start()
    running = gateway(route_cache_seconds=0.5, route_recheck_seconds=1)
    client = SshClient(tmp_path, alice.key, running.port)
    held = client.popen("-J", client.jump(alice.name), "root@login", "echo ready; exec sleep 600")
    try:
        assert held.stdout is not None
        assert held.stdout.readline() == "ready\n"

        assert site.admin.patch(f"/api/v1/users/{alice.name}", json={"active": False}).status_code == 200

        _, stderr = held.communicate(timeout=30)  # a guard against a hang: the bound is 1.5 s
        assert held.returncode == 255
        assert "your access to the login pod login was removed" in stderr
        wait_until(
            lambda: any(e["action"] == "cut" for e in site.audit(alice.name)), 60, "the cut in the audit log"
        )
        cut = [e for e in site.audit(alice.name) if e["action"] == "cut"]
        assert [(e["resource_name"], e["after"]["reason"], e["after"]["pod"]) for e in cut] == [
            (alice.name, "inactive", "login")
        ]
        assert running.tunnels() == 0
    finally:
        if held.poll() is None:
            held.kill()
        held.communicate()


def _certify(ca_key: Path, person: Person, *, principal: str | None = None, **when: Any) -> None:
    """Sign `person`'s key as SUP's CA does (the signing endpoint itself is tested with a real
    Keycloak token in tests/keycloak/test_ssh_certificates.py) and put the certificate where OpenSSH
    looks for it: beside the key."""
    made = sshcerts.sign_user_certificate(
        sshcerts.load_ca_key(ca_key.read_bytes()), person.public, principal=principal or person.name,
        serial=7, key_id=f"sup:{person.name}:7", now=when.get("now", datetime.now(UTC)),
        lifetime=timedelta(hours=1), extensions=["permit-port-forwarding", "permit-pty"],
    )  # fmt: skip
    Path(f"{person.key}-cert.pub").write_text(made.line + "\n")


def test_a_certificate_from_sups_ca_passes_the_gateway_into_the_pod(
    site: Site,
    gateway: Callable[..., RunningGateway],
    stand_in_pod: StandInPod,
    tmp_path: Path,
) -> None:
    """No key uploaded: carol logs in with a certificate of SUP's CA, through the gateway into a
    pod whose sshd trusts the CA (TrustedUserCAKeys, a principals file naming carol). A certificate
    for another principal, an expired one and another CA's are refused at the gateway, and so is
    carol's own once she is suspended, at once (the gateway asks SUP about the person)."""
    carol = Person.make(tmp_path, f"carol{next(_numbers)}")
    assert site.admin.post("/api/v1/users", json={"username": carol.name}).status_code == 201
    wait_until(lambda: site.replicas(carol.name) == 1, 60, "carol's login StatefulSet")
    trusted = site.admin.get("/api/v1/ssh-ca").json()["trusted_user_ca_keys"]
    (stand_in_pod.directory / "ca.pub").write_text("".join(f"{line}\n" for line in trusted))
    (stand_in_pod.directory / "principals").write_text(f"{carol.name}\n")
    stand_in_pod.start(
        "-o", f"TrustedUserCAKeys={stand_in_pod.directory / 'ca.pub'}",
        "-o", f"AuthorizedPrincipalsFile={stand_in_pod.directory / 'principals'}",
    )  # fmt: skip
    running = gateway(route_cache_seconds=0.5)
    client = SshClient(tmp_path, carol.key, running.port)

    _certify(site.ca_key, carol)
    landed = client.ssh(carol.name, "login", "echo landed")
    assert landed.returncode == 0, landed.stderr
    assert landed.stdout == "landed\n"
    logins = [e for e in site.audit(carol.name) if e["action"] == "login"]
    assert logins and logins[0]["after"]["fingerprint"].startswith("cert:SHA256:")

    def refused_at_the_gateway() -> None:
        answer = client.ssh(carol.name, "login", "echo landed")
        assert answer.returncode == 255 and "Permission denied (publickey)" in answer.stderr, answer.stderr

    _certify(site.ca_key, carol, principal="someone-else")
    refused_at_the_gateway()
    _certify(site.ca_key, carol, now=datetime.now(UTC) - timedelta(hours=3))
    refused_at_the_gateway()
    other_ca = tmp_path / "other_ca"
    keygen(other_ca, "not-sups")
    _certify(other_ca, carol)
    refused_at_the_gateway()

    _certify(site.ca_key, carol)
    assert client.ssh(carol.name, "login", "true").returncode == 0
    assert site.admin.patch(f"/api/v1/users/{carol.name}", json={"active": False}).status_code == 200
    time.sleep(1)  # the gateway's route cache (0.5 s)
    refused_at_the_gateway()


IDLE, HEARTBEAT, GAP = 8, 3, 4  # the next test's idle_seconds, heartbeat_seconds, gap between sessions


@pytest.mark.parametrize(
    "idle_settings", [{"idle_seconds": IDLE, "heartbeat_seconds": HEARTBEAT}], indirect=True
)
def test_short_sessions_a_few_seconds_apart_keep_the_pod_awake_and_it_sleeps_idle_seconds_after(
    site: Site,
    gateway: Callable[..., RunningGateway],
    stand_in_pod: StandInPod,
    reporters: dict[str, IdleReporter],
    alice: Person,
    tmp_path: Path,
) -> None:
    """Someone runs a short command every 4 s (each session shorter than the heartbeat interval, 3 s,
    so mostly in no heartbeat's sessions; idle_seconds 8) while SUP's passes run every 0.25 s: their
    pod is never put to sleep (before, it was within seconds). Once they stop, it sleeps, and not
    before idle_seconds after their last login."""
    wait_until(lambda: site.replicas(alice.name) == 1, 60, "alice's login StatefulSet")
    stand_in_pod.start()
    running = gateway(reporters=reporters)  # alice's reporter: nothing of hers runs (idle)
    site.reconcile_kube()  # first sight: in use now
    stop = threading.Event()
    passes = 0
    failed: list[BaseException] = []

    def passes_back_to_back() -> None:
        """A pass every 0.25 s (more would meet api.rate_limit, 20 writes per second)."""
        nonlocal passes
        try:
            while not stop.wait(0.25):
                site.reconcile_kube()
                passes += 1
        except BaseException as exc:  # reported by the test, not lost in the thread
            failed.append(exc)

    passing = threading.Thread(target=passes_back_to_back)
    passing.start()
    client = SshClient(tmp_path, alice.key, running.port)
    sessions = 0
    try:
        end = time.monotonic() + 40
        while time.monotonic() < end:
            landed = client.ssh(alice.name, "login", "true")
            assert landed.returncode == 0, landed.stderr
            sessions += 1
            time.sleep(GAP)
    finally:
        stop.set()
        passing.join()
    assert failed == []
    slept = [e for e in site.audit(alice.name) if e["action"] == "sleep"]
    assert slept == [], f"alice's pod was put to sleep while she used it: {slept}"
    assert site.replicas(alice.name) == 1
    assert sessions >= 6 and passes >= 40, (sessions, passes)  # the passes did run meanwhile

    deadline = time.monotonic() + 60
    while site.replicas(alice.name) != 0:
        assert time.monotonic() < deadline, "alice's pod never slept once she stopped"
        site.reconcile_kube()
        time.sleep(0.5)
    audit = site.audit(alice.name)
    logins = [_at(e) for e in audit if e["action"] == "login"]
    [sleep] = [_at(e) for e in audit if e["action"] == "sleep"]
    assert len(logins) == sessions
    # idle_seconds after her last session, within a heartbeat and the login event's own delay
    assert sleep - max(logins) >= timedelta(seconds=IDLE - 2), (max(logins), sleep)


def _at(entry: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(entry["at"])
