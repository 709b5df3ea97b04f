"""Fixtures of the SSH gateway tests: a stand-in SUP API, real sshd "login pods", people's keys, and
the gateway run in process (tests/support/gateway_runner.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway_api import GatewayApiStandIn, pod
from tests.support.gateway_runner import RunningGateway, write_host_key
from tests.support.ports import free_port
from tests.support.sshd import (
    SshClient,
    SshdUnavailable,
    StandInPod,
    find_client,
    find_sshd,
    fingerprint,
    keygen,
)


@dataclass(frozen=True)
class Person:
    name: str
    key: Path
    public: str
    fingerprint: str


@pytest.fixture(scope="session")
def openssh() -> None:
    try:
        find_sshd()
        find_client()
    except SshdUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def keys_dir(tmp_path_factory: pytest.TempPathFactory, openssh: None) -> Path:
    return tmp_path_factory.mktemp("gateway-keys")


def _person(directory: Path, name: str) -> Person:
    key = directory / name
    public = keygen(key, f"{name}@test")
    return Person(name, key, public, fingerprint(Path(f"{key}.pub")))


@pytest.fixture(scope="session")
def alice(keys_dir: Path) -> Person:
    return _person(keys_dir, "alice")


@pytest.fixture(scope="session")
def bob(keys_dir: Path) -> Person:
    return _person(keys_dir, "bob")


@pytest.fixture(scope="session")
def host_key(keys_dir: Path) -> Path:
    return write_host_key(keys_dir / "gateway_host_key")


@pytest.fixture
def api() -> Iterator[GatewayApiStandIn]:
    stand_in = GatewayApiStandIn().start()
    yield stand_in
    stand_in.stop()


@pytest.fixture
def stand_in_pod(tmp_path: Path, alice: Person) -> Iterator[StandInPod]:
    """Alice's login pod: sshd admitting her key, not started (a test starts it, or a wake does)."""
    server = StandInPod(tmp_path / "pod-alice", free_port(), [alice.public])
    yield server
    server.stop()


@pytest.fixture
def route_alice(
    api: GatewayApiStandIn, alice: Person, stand_in_pod: StandInPod
) -> Callable[..., dict[str, Any]]:
    """Put alice's route in the stand-in API: her own pod (awake unless told) and any group pods."""

    def put(*, awake: bool = True, groups: tuple[str, ...] = ()) -> dict[str, Any]:
        pods = [pod("login", "alice", stand_in_pod.port, awake=awake)]
        pods += [pod(group, group, stand_in_pod.port, kind="group") for group in groups]
        route = {"username": "alice", "fingerprints": [alice.fingerprint], "pods": pods}
        api.routes["alice"] = route
        return route

    return put


@pytest.fixture
def make_gateway(api: GatewayApiStandIn, host_key: Path) -> Iterator[Callable[..., RunningGateway]]:
    started: list[RunningGateway] = []

    def make(**settings: Any) -> RunningGateway:
        gateway = RunningGateway(api.url, host_key, **settings)
        started.append(gateway)
        return gateway

    yield make
    for gateway in started:
        gateway.stop()


@pytest.fixture
def client_for(tmp_path: Path) -> Callable[[Person, RunningGateway], SshClient]:
    def make(person: Person, gateway: RunningGateway) -> SshClient:
        return SshClient(tmp_path, person.key, gateway.port)

    return make
