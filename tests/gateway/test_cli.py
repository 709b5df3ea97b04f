"""`sup gateway` as an operator runs it: settings from SUP_*, the token and host key from files,
metrics on their own port, SIGTERM stops it."""

from __future__ import annotations

import signal
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway.scenario import GatewayScenario
from tests.support.certs import write_server_tls
from tests.support.cli import run_sup, sup_env, sup_executable
from tests.support.gateway_api import TOKEN, GatewayApiStandIn
from tests.support.ports import free_port
from tests.support.sshd import SshClient, wait_listening


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


def test_sup_gateway_serves_a_login_and_its_metrics(scenario: GatewayScenario, tmp_path: Path) -> None:
    scenario.route_alice()
    scenario.pod.start()
    port, metrics_port = free_port(), free_port()
    env = _env(scenario.api, scenario.host_key, tmp_path, port, metrics_port, workers=1)
    gateway = subprocess.Popen([sup_executable(), "gateway"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(port, gateway)
        result = SshClient(tmp_path, scenario.alice.key, port).ssh("alice", "login", "whoami")
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


def test_sup_gateway_workers_share_the_port(scenario: GatewayScenario, tmp_path: Path) -> None:
    api = scenario.api
    scenario.route_alice()
    scenario.pod.start()
    port, metrics_port = free_port(), free_port()
    gateway = subprocess.Popen(
        [sup_executable(), "gateway"],
        env=_env(api, scenario.host_key, tmp_path, port, metrics_port, workers=2),
    )
    try:
        api.wait_for(lambda: len({beat["gateway"] for beat in api.heartbeats}) == 2)  # two processes
        client = SshClient(tmp_path, scenario.alice.key, port)
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


def test_metrics_listen_on_loopback_unless_told_otherwise(scenario: GatewayScenario, tmp_path: Path) -> None:
    """ssh answers on every address by default (`listen_host` 0.0.0.0: people connect from outside);
    /metrics, which says who is refused and how busy the gateway is, on loopback only. The chart sets
    `metrics_host` to the pod's own address for Prometheus."""
    for metrics_host, reachable, unreachable in [
        (None, "127.0.0.1", "127.0.0.2"),
        ("127.0.0.2", "127.0.0.2", "127.0.0.1"),
    ]:
        port, metrics_port = free_port("0.0.0.0"), free_port("0.0.0.0")  # ssh on every address
        env = _env(scenario.api, scenario.host_key, tmp_path, port, metrics_port, workers=1)
        del env["SUP_GATEWAY__LISTEN_HOST"]  # the default
        if metrics_host is not None:
            env["SUP_GATEWAY__METRICS_HOST"] = metrics_host
        gateway = subprocess.Popen([sup_executable(), "gateway"], env=env, stderr=subprocess.DEVNULL)
        try:
            wait_listening(port, gateway)
            wait_listening(metrics_port, gateway, host=reachable)  # /metrics may start after ssh
            assert httpx.get(f"http://{reachable}:{metrics_port}/metrics").status_code == 200
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"http://{unreachable}:{metrics_port}/metrics")
        finally:
            gateway.kill()
            gateway.wait()


@pytest.fixture
def tls_api(tmp_path: Path) -> Iterator[tuple[GatewayApiStandIn, Path]]:
    """The stand-in SUP behind TLS: a certificate for 127.0.0.1 from a CA of its own (its file)."""
    ca_file, cert_file, key_file = write_server_tls(tmp_path, name="sup")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    stand_in = GatewayApiStandIn(tls=context).start()
    yield stand_in, ca_file
    stand_in.stop()


def test_the_gateway_reaches_sup_over_tls_checking_its_certificate(
    scenario: GatewayScenario, tls_api: tuple[GatewayApiStandIn, Path], tmp_path: Path
) -> None:
    """SUP behind a TLS terminator: with `sup_ca_file` the gateway checks SUP's certificate against
    that CA and logins work; without it (a CA the system does not know) nothing is sent, the token
    included, and nobody passes."""
    api, ca_file = tls_api  # instead of the scenario's plain-HTTP stand-in
    host_key = scenario.host_key
    assert api.url.startswith("https://")
    api.routes["alice"] = scenario.route_alice()
    scenario.pod.start()
    for ca in (str(ca_file), None):
        port, metrics_port = free_port(), free_port()
        env = _env(api, host_key, tmp_path, port, metrics_port, workers=1)
        if ca is not None:
            env["SUP_GATEWAY__SUP_CA_FILE"] = ca
        gateway = subprocess.Popen([sup_executable(), "gateway"], env=env, stderr=subprocess.DEVNULL)
        try:
            wait_listening(port, gateway)
            result = SshClient(tmp_path, scenario.alice.key, port).ssh("alice", "login", "whoami")
            if ca is not None:
                assert result.returncode == 0, result.stderr
                assert result.stdout == "root\n"
                assert api.route_calls == ["alice"]
            else:
                assert result.returncode != 0
                assert api.route_calls == ["alice"]  # not one more: the handshake failed, no request
        finally:
            gateway.kill()
            gateway.wait()

    # a CA bundle with a plain-HTTP URL, or one that cannot be read: refused at start, saying why
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    base = {"SUP_GATEWAY__TOKEN_FILE": str(token_file), "SUP_GATEWAY__HOST_KEY_FILE": str(host_key)}
    plain = run_sup(
        "gateway",
        env=sup_env(**base, SUP_GATEWAY__SUP_URL="http://sup:8080", SUP_GATEWAY__SUP_CA_FILE=str(ca_file)),
    )
    assert plain.returncode != 0
    assert "sup_ca_file is set but sup_url 'http://sup:8080' is not https://" in plain.stderr
    missing = run_sup(
        "gateway",
        env=sup_env(
            **base, SUP_GATEWAY__SUP_URL=api.url, SUP_GATEWAY__SUP_CA_FILE=str(tmp_path / "none.pem")
        ),
    )
    assert missing.returncode == 6
    assert f"cannot read gateway.sup_ca_file {tmp_path / 'none.pem'}" in missing.stderr
