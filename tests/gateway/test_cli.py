"""`sup gateway` as an operator runs it: settings from SUP_*, the token and host key from files,
metrics on their own port, SIGTERM stops it."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.gateway.conftest import Person
from tests.support.cli import run_sup, sup_env, sup_executable
from tests.support.gateway_api import TOKEN, GatewayApiStandIn
from tests.support.ports import free_port
from tests.support.sshd import SshClient, StandInPod, wait_listening


def _env(
    api: GatewayApiStandIn, host_key: Path, tmp_path: Path, port: int, metrics_port: int, workers: int
) -> dict[str, str]:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    return sup_env(
        SUP_GATEWAY__SUP_URL=api.url,
        SUP_GATEWAY__TOKEN_FILE=str(token_file),
        SUP_GATEWAY__HOST_KEY_FILE=str(host_key),
        SUP_GATEWAY__LISTEN_HOST="127.0.0.1",
        SUP_GATEWAY__LISTEN_PORT=str(port),
        SUP_GATEWAY__METRICS_PORT=str(metrics_port),
        SUP_GATEWAY__POD_ADDRESS="127.0.0.1",  # every "pod" is the stand-in sshd; the port is the route's
        SUP_GATEWAY__WORKERS=str(workers),
        SUP_LOG__FORMAT="text",
    )


def test_sup_gateway_serves_a_login_and_its_metrics(
    api: GatewayApiStandIn,
    alice: Person,
    stand_in_pod: StandInPod,
    route_alice: Callable[..., Any],
    host_key: Path,
    tmp_path: Path,
) -> None:
    route_alice()
    stand_in_pod.start()
    port, metrics_port = free_port(), free_port()
    env = _env(api, host_key, tmp_path, port, metrics_port, workers=1)
    gateway = subprocess.Popen([sup_executable(), "gateway"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(port, gateway)
        result = SshClient(tmp_path, alice.key, port).ssh("alice", "login", "whoami")
        assert result.returncode == 0, result.stderr
        assert result.stdout == "root\n"

        metrics = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
        assert 'sup_gateway_connections_total{result="ok"} 1.0' in metrics
        assert "sup_gateway_connect_seconds_count 1.0" in metrics

        gateway.send_signal(signal.SIGTERM)
        assert gateway.wait(timeout=30) == 0
        assert gateway.stderr is not None
        logged = gateway.stderr.read()
        assert TOKEN not in logged
        assert "gateway listening on 127.0.0.1" in logged
    finally:
        if gateway.poll() is None:
            gateway.kill()
            gateway.wait()


def test_sup_gateway_says_what_is_missing(tmp_path: Path, host_key: Path) -> None:
    absent = run_sup("gateway", env=sup_env())
    assert absent.returncode == 6
    assert "no `gateway` settings section" in absent.stderr

    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    no_key = run_sup(
        "gateway",
        env=sup_env(
            SUP_GATEWAY__SUP_URL="http://127.0.0.1:9",
            SUP_GATEWAY__TOKEN_FILE=str(token_file),
            SUP_GATEWAY__HOST_KEY_FILE=str(tmp_path / "missing"),
        ),
    )
    assert no_key.returncode == 6
    assert "cannot read the gateway's host key" in no_key.stderr


def test_sup_gateway_workers_share_the_port(
    api: GatewayApiStandIn,
    alice: Person,
    stand_in_pod: StandInPod,
    route_alice: Callable[..., Any],
    host_key: Path,
    tmp_path: Path,
) -> None:
    route_alice()
    stand_in_pod.start()
    port, metrics_port = free_port(), free_port()
    gateway = subprocess.Popen(
        [sup_executable(), "gateway"], env=_env(api, host_key, tmp_path, port, metrics_port, workers=2)
    )
    try:
        api.wait_for(lambda: len({beat["gateway"] for beat in api.heartbeats}) == 2)  # two processes
        client = SshClient(tmp_path, alice.key, port)
        for _ in range(4):
            assert client.ssh("alice", "login", "whoami").stdout == "root\n"

        logins = 0.0
        for worker_metrics in (metrics_port, metrics_port + 1):  # child N serves metrics_port + N
            for line in httpx.get(f"http://127.0.0.1:{worker_metrics}/metrics").text.splitlines():
                if line.startswith('sup_gateway_connections_total{result="ok"}'):
                    logins += float(line.split()[1])
        assert logins == 4

        gateway.send_signal(signal.SIGTERM)
        assert gateway.wait(timeout=60) == 0
    finally:
        if gateway.poll() is None:
            gateway.kill()
            gateway.wait()
