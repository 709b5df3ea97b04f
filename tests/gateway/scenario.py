"""The scene most gateway tests play in, as one object: a stand-in SUP API (tests/support/gateway_api.py),
alice's login pod (a real sshd admitting her key, not started until a test or a wake starts it), two
people with keys, and `sup gateway`'s server run in process against that API
(tests/support/gateway_runner.py). The `scenario` fixture (conftest.py) gives each test a fresh one.

Why one per test: every test changes the API's routes and reads what it recorded (events, wakes,
heartbeats), starts the pod with its own sshd options and the gateway with its own settings; the
stand-in and an unstarted pod cost milliseconds. What is slow to make and never changes, the
people's keys and the gateway's host key, is made once per session (conftest.py)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.gateway_api import GatewayApiStandIn, pod
from tests.support.gateway_runner import RunningGateway
from tests.support.sshd import SshClient, StandInPod, fingerprint, keygen


@dataclass(frozen=True)
class Person:
    name: str
    key: Path
    public: str
    fingerprint: str

    @classmethod
    def make(cls, directory: Path, name: str) -> Person:
        """A new ed25519 key pair in `directory`, commented name@test."""
        key = directory / name
        public = keygen(key, f"{name}@test")
        return cls(name, key, public, fingerprint(Path(f"{key}.pub")))


@dataclass
class GatewayScenario:
    api: GatewayApiStandIn
    pod: StandInPod  # alice's login pod, at a port of its own; every route's pods point at it
    alice: Person
    bob: Person
    keys_dir: Path  # where the people's keys are (a test may add another key there)
    host_key: Path
    workdir: Path  # the test's tmp_path: the clients' ssh configs and known_hosts
    gateways: list[RunningGateway] = field(default_factory=list)

    def route_alice(self, *, awake: bool = True, groups: tuple[str, ...] = ()) -> dict[str, Any]:
        """Put alice's route in the stand-in API: her own pod (awake unless told) and any group
        pods, all at the stand-in pod's port."""
        pods = [pod("login", "alice", self.pod.port, awake=awake)]
        pods += [pod(group, group, self.pod.port, kind="group") for group in groups]
        route = {"username": "alice", "fingerprints": [self.alice.fingerprint], "pods": pods}
        self.api.routes["alice"] = route
        return route

    def route_alice_to(self, port: int) -> None:
        """alice's own pod, awake, at `port` (a test's own listener instead of sshd)."""
        self.api.routes["alice"] = {
            "username": "alice",
            "fingerprints": [self.alice.fingerprint],
            "pods": [pod("login", "alice", port)],
        }

    def start_gateway(self, **settings: Any) -> RunningGateway:
        """The gateway in process against the stand-in API, with these GatewaySettings fields;
        stopped with the scenario."""
        gateway = RunningGateway(self.api.url, self.host_key, **settings)
        self.gateways.append(gateway)
        return gateway

    def open_for_alice(self, *sshd_options: str, **settings: Any) -> RunningGateway:
        """The usual opening: alice's route to her awake pod, the pod's sshd started (with
        `sshd_options`, e.g. forwarding_options), and a gateway with `settings`."""
        self.route_alice()
        self.pod.start(*sshd_options)
        return self.start_gateway(**settings)

    def client(self, person: Person, gateway: RunningGateway | None = None) -> SshClient:
        """OpenSSH's client with `person`'s key, jumping through `gateway` (the last started)."""
        return SshClient(self.workdir, person.key, (gateway or self.gateways[-1]).port)

    def ssh(
        self, person: Person, pod_name: str, *command: str, user: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`ssh -J USER@gateway root@POD command` with `person`'s key through the last gateway
        started; USER is the person's own name unless `user` says another."""
        return self.client(person).ssh(user or person.name, pod_name, *command)

    def events(self, event: str) -> list[dict[str, Any]]:
        """The audit events of that kind ("login", "refused", "cut") SUP was told, oldest first."""
        return [e for e in self.api.events if e["event"] == event]

    def close(self) -> None:
        for gateway in self.gateways:
            gateway.stop()
        self.pod.stop()
        self.api.stop()
