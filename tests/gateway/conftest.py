"""Fixtures of the SSH gateway tests. Most tests take `scenario` (scenario.py: the stand-in SUP API,
alice's sshd "login pod", alice and bob, the gateway run in process); test_with_sup.py builds its
own site around a real `sup serve` and takes the pieces (`alice`, `bob`, `host_key`, `stand_in_pod`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.scenario import GatewayScenario, Person
from tests.support.gateway_api import GatewayApiStandIn
from tests.support.gateway_runner import write_host_key
from tests.support.ports import free_port
from tests.support.sshd import SshdUnavailable, StandInPod, find_client, find_sshd


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


@pytest.fixture(scope="session")
def alice(keys_dir: Path) -> Person:
    return Person.make(keys_dir, "alice")


@pytest.fixture(scope="session")
def bob(keys_dir: Path) -> Person:
    return Person.make(keys_dir, "bob")


@pytest.fixture(scope="session")
def host_key(keys_dir: Path) -> Path:
    return write_host_key(keys_dir / "gateway_host_key")


def _alices_pod(directory: Path, alice: Person) -> StandInPod:
    """Alice's login pod: sshd admitting her key, not started (a test starts it, or a wake does)."""
    return StandInPod(directory / "pod-alice", free_port(), [alice.public])


@pytest.fixture
def stand_in_pod(tmp_path: Path, alice: Person) -> Iterator[StandInPod]:
    server = _alices_pod(tmp_path, alice)
    yield server
    server.stop()


@pytest.fixture
def scenario(
    tmp_path: Path, keys_dir: Path, alice: Person, bob: Person, host_key: Path
) -> Iterator[GatewayScenario]:
    """A fresh scene for each test (scenario.py says why not wider); what it started stops after."""
    made = GatewayScenario(
        api=GatewayApiStandIn().start(),
        pod=_alices_pod(tmp_path, alice),
        alice=alice,
        bob=bob,
        keys_dir=keys_dir,
        host_key=host_key,
        workdir=tmp_path,
    )
    try:
        yield made
    finally:
        made.close()
