"""Forwarding through the gateway is the pod's sshd's to allow (kube.ssh_tcp_forwarding and
kube.ssh_agent_forwarding; docs/login-pods.md, "Forwarding"): the stand-in pod's sshd gets the same
options the login image gives it (tests/support/sshd.py, forwarding_options), and OpenSSH's client
shows what a person sees. The gateway's own connection never takes an agent or a forwarding."""

from __future__ import annotations

import logging
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.scenario import GatewayScenario, Person
from tests.support.ports import free_port
from tests.support.processes import stop_process
from tests.support.sshd import SshClient, forwarding_options, wait_listening

BANNER = b"a service only the pod can see\n"


@pytest.fixture
def service() -> Iterator[int]:
    """A TCP service next to the pod (on the same loopback) that sends BANNER to each connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    port: int = listener.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.sendall(BANNER)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port
    listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (close alone does not)
    listener.close()
    thread.join(timeout=10)


def _read_all(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        received = b""
        while chunk := connection.recv(4096):
            received += chunk
        return received


def _through_local_forward(client: SshClient, service: int) -> tuple[bytes, str]:
    """`ssh -J gateway -L PORT:127.0.0.1:SERVICE root@login`, one connection to PORT: what it
    received, and what ssh printed. The session lasts until its input ends (a clean exit, which
    ends the tunnel through the gateway too)."""
    local = free_port()
    forward = f"127.0.0.1:{local}:127.0.0.1:{service}"
    argv = ["ssh", "-F", str(client.config), "-L", forward, "-J", client.jump("alice"), "root@login", "cat"]
    session = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_listening(local, session)
        received = _read_all(local)
    finally:
        _, printed = session.communicate(b"", timeout=60)
    return received, printed.decode()


def test_local_forwarding_when_the_site_allows_it(scenario: GatewayScenario, service: int) -> None:
    """The default, `local`: `ssh -L` reaches what the pod can reach; `ssh -R` (the pod listening
    for the person's machine) is refused."""
    scenario.open_for_alice(*forwarding_options(tcp="local", agent="yes"))
    client = scenario.client(scenario.alice)

    received, _ = _through_local_forward(client, service)
    remote = client.direct(
        "-N",
        "-o",
        "ExitOnForwardFailure=yes",
        "-R",
        "0:127.0.0.1:9",
        "-J",
        client.jump("alice"),
        "root@login",
    )

    assert received == BANNER
    assert remote.returncode == 255
    assert "remote port forwarding failed" in remote.stderr


def test_local_forwarding_refused_when_the_site_says_no(scenario: GatewayScenario, service: int) -> None:
    scenario.open_for_alice(*forwarding_options(tcp="no", agent="yes"))
    client = scenario.client(scenario.alice)

    received, printed = _through_local_forward(client, service)

    assert received == b""
    assert "administratively prohibited" in printed


@pytest.fixture
def agent(tmp_path: Path, alice: Person) -> Iterator[Path]:
    """alice's ssh-agent holding her key; its socket."""
    sock = tmp_path / "agent.sock"
    process = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not sock.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        subprocess.run(
            ["ssh-add", "-q", str(alice.key)],
            env={"SSH_AUTH_SOCK": str(sock)},
            check=True,
            capture_output=True,
        )
        yield sock
    finally:
        stop_process(process)


SHOW_AGENT = 'echo "SSH_AUTH_SOCK=${SSH_AUTH_SOCK:-none}"; ssh-add -l 2>&1; true'


@pytest.mark.parametrize(("allowed", "reaches"), [("yes", True), ("no", False)])
def test_agent_forwarding_reaches_the_pod_only_when_allowed(
    scenario: GatewayScenario, agent: Path, allowed: str, reaches: bool
) -> None:
    scenario.open_for_alice(*forwarding_options(tcp="local", agent=allowed))
    client = scenario.client(scenario.alice)

    result = client.direct(
        "-A", "-o", f"IdentityAgent={agent}", "-J", client.jump("alice"), "root@login", SHOW_AGENT
    )

    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    if reaches:
        assert (
            first.startswith("SSH_AUTH_SOCK=/") and first != f"SSH_AUTH_SOCK={agent}"
        )  # the pod's own socket
        assert scenario.alice.fingerprint in result.stdout  # git in the pod can sign with her key
    else:
        assert first == "SSH_AUTH_SOCK=none"
        assert scenario.alice.fingerprint not in result.stdout


def test_the_gateway_itself_never_takes_the_agent(
    scenario: GatewayScenario, agent: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`ssh -A` straight to the gateway: the help text, and the agent request refused (asyncssh logs
    the refusal; the gateway serves no agent channel)."""
    scenario.route_alice()
    gateway = scenario.start_gateway()
    caplog.set_level(logging.INFO, logger="asyncssh")

    result = scenario.client(scenario.alice).direct(
        "-A", "-o", f"IdentityAgent={agent}", "-p", str(gateway.port), "alice@127.0.0.1", "true"
    )

    assert result.returncode == 1
    assert "ProxyJump" in result.stderr
    assert "Agent forwarding request denied" in caplog.text
    assert "Agent forwarding enabled" not in caplog.text
