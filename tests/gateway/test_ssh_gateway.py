"""The SSH gateway in process against OpenSSH's own client (`ssh -J`, `scp -J`, `sftp -J`,
`rsync -e 'ssh -J ...'`) and a real sshd as the login pod; SUP's gateway API is a stand-in that keeps
to the contract (tests/support/gateway_api.py).

What each test asserts is what a person sees on their terminal, and what SUP is told."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import threading
from pathlib import Path

from prometheus_client import REGISTRY

from tests.gateway.scenario import GatewayScenario
from tests.support.sshd import SshClient, keygen

PERMISSION_DENIED = "Permission denied (publickey)"


def _seen(stderr: str, username: str) -> list[str]:
    """What the client printed, the username and the known_hosts notice (first connection) aside."""
    return [line.replace(username, "X") for line in stderr.splitlines() if "Permanently added" not in line]


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_own_key_lands_in_own_pod(scenario: GatewayScenario, tmp_path: Path) -> None:
    api, alice = scenario.api, scenario.alice
    scenario.open_for_alice()
    written = tmp_path / "written-through-the-gateway"

    result = scenario.ssh(alice, "login", f"whoami; echo hello > {written}")

    assert result.returncode == 0, result.stderr
    assert result.stdout == "root\n"  # the stand-in pod's account: the inner login is end to end
    assert written.read_text() == "hello\n"
    logins = scenario.events("login")
    assert logins == [
        {
            "event": "login",
            "username": "alice",
            "fingerprint": alice.fingerprint,
            "source": logins[0]["source"],
            "reason": None,
            "pod": None,
        }
    ]
    assert logins[0]["source"].startswith("127.0.0.1:")
    assert api.wakes == []


def test_a_group_pod_by_its_name(scenario: GatewayScenario) -> None:
    scenario.route_alice(groups=("physics",))
    scenario.pod.start()
    scenario.start_gateway()

    assert scenario.ssh(scenario.alice, "physics", "whoami").stdout == "root\n"
    other = scenario.ssh(scenario.alice, "chemistry", "whoami")
    assert other.returncode == 255
    assert "administratively prohibited: no login pod named chemistry" in other.stderr


def test_no_address_of_the_clients_choosing(scenario: GatewayScenario) -> None:
    """`ssh -W host:port` through the gateway reaches only pods by name, never the address asked for,
    and forwarding on the outer connection is refused."""
    gateway = scenario.open_for_alice()
    client = scenario.client(scenario.alice)

    direct = client.direct("-W", f"127.0.0.1:{scenario.pod.port}", "-p", str(gateway.port), "alice@127.0.0.1")
    assert direct.returncode == 255
    assert "no login pod named 127.0.0.1" in direct.stderr

    remote = client.direct(
        "-N",
        "-o",
        "ExitOnForwardFailure=yes",
        "-R",
        "0:127.0.0.1:9",
        "-p",
        str(gateway.port),
        "alice@127.0.0.1",
    )
    assert remote.returncode == 255
    assert "remote port forwarding failed" in remote.stderr


def test_session_channel_gets_help_and_exit_1(scenario: GatewayScenario) -> None:
    scenario.route_alice()
    gateway = scenario.start_gateway(public_host="login.cluster.example")

    result = scenario.client(scenario.alice).direct("-p", str(gateway.port), "alice@127.0.0.1", "id")

    assert result.returncode == 1
    assert "ssh -J alice@login.cluster.example alice@login" in result.stderr
    assert "ProxyJump alice@login.cluster.example" in result.stderr
    assert result.stdout == ""


def test_another_persons_key_is_refused(scenario: GatewayScenario) -> None:
    api, bob = scenario.api, scenario.bob
    scenario.route_alice(awake=False)  # asleep: a refused key must not wake it
    scenario.start_gateway()
    before = metric("sup_gateway_refusals_total", reason="wrong_key")

    result = scenario.ssh(bob, "login", "whoami", user="alice")

    assert result.returncode == 255
    assert PERMISSION_DENIED in result.stderr
    assert "Starting your login pod" not in result.stderr  # no banner for a key that is not hers
    api.wait_for(lambda: any(e["event"] == "refused" for e in api.events))
    assert [(e["event"], e["username"], e["reason"], e["fingerprint"]) for e in api.events] == [
        ("refused", "alice", "wrong_key", bob.fingerprint)  # the key offered, for the audit log
    ]
    assert api.wakes == []
    assert metric("sup_gateway_refusals_total", reason="wrong_key") == before + 1


def test_unknown_and_suspended_people_are_refused_alike_without_a_wake(scenario: GatewayScenario) -> None:
    api = scenario.api
    api.refusal_reasons["carol"] = "inactive"
    scenario.start_gateway()

    unknown = scenario.ssh(scenario.alice, "login", "whoami", user="mallory")
    suspended = scenario.ssh(scenario.alice, "login", "whoami", user="carol")

    assert unknown.returncode == suspended.returncode == 255
    assert PERMISSION_DENIED in unknown.stderr
    assert _seen(unknown.stderr, "mallory") == _seen(suspended.stderr, "carol")
    api.wait_for(lambda: len(api.events) == 2)
    assert sorted((e["username"], e["reason"]) for e in api.events) == [
        ("carol", "inactive"),
        ("mallory", "unknown"),
    ]
    assert api.wakes == []


def test_a_sleeping_pod_is_woken_and_the_connection_succeeds(scenario: GatewayScenario) -> None:
    api = scenario.api
    scenario.route_alice(awake=False)
    # The "pod" starts only when SUP is asked to wake it, and only after answering (as the kube
    # target's apply does: replicas 1, then the pod takes its time).
    api.on_wake = lambda body: threading.Thread(target=scenario.pod.start).start()
    scenario.start_gateway()
    wakes_before = metric("sup_gateway_wake_seconds_count")

    result = scenario.ssh(scenario.alice, "login", "whoami")

    assert result.returncode == 0, result.stderr
    assert result.stdout == "root\n"
    assert "Starting your login pod" in result.stderr  # the banner, printed by the jump's ssh
    assert api.wakes == [{"kind": "user", "name": "alice"}]
    assert metric("sup_gateway_wake_seconds_count") == wakes_before + 1


def test_a_pod_that_does_not_start_gives_a_clear_message(scenario: GatewayScenario) -> None:
    scenario.route_alice(awake=False)  # and nothing starts it
    scenario.start_gateway(wake_timeout_seconds=2)

    result = scenario.ssh(scenario.alice, "login", "whoami")

    assert result.returncode == 255
    assert "connect failed: your login pod did not start within 2 s; try again in a minute" in result.stderr
    assert scenario.api.wakes == [{"kind": "user", "name": "alice"}]


def test_scp_round_trip(scenario: GatewayScenario, tmp_path: Path) -> None:
    scenario.open_for_alice()
    client = scenario.client(scenario.alice)
    original = tmp_path / "original.bin"
    original.write_bytes(bytes(range(256)) * 8192)  # 2 MiB
    remote = tmp_path / "on-the-pod.bin"
    back = tmp_path / "back.bin"

    up = client.scp("alice", str(original), f"root@login:{remote}")
    down = client.scp("alice", f"root@login:{remote}", str(back))

    assert up.returncode == 0, up.stderr
    assert down.returncode == 0, down.stderr
    assert back.read_bytes() == original.read_bytes()


def _files_to_copy(directory: Path) -> dict[str, bytes]:
    """A few MiB to copy: random bytes (every byte value, no line structure) and a text file."""
    directory.mkdir()
    files = {"data.bin": os.urandom(3 << 20) + bytes(range(256)), "notes.txt": b"line one\nline two\n"}
    for name, content in files.items():
        (directory / name).write_bytes(content)
    return files


def test_sftp_round_trip(scenario: GatewayScenario, tmp_path: Path) -> None:
    """`sftp -J`: the pod's sftp subsystem through the tunnel (the gateway refuses its own)."""
    scenario.open_for_alice()
    client = scenario.client(scenario.alice)
    files = _files_to_copy(tmp_path / "mine")
    remote = tmp_path / "on-the-pod"
    back = tmp_path / "back"
    back.mkdir()
    batch = tmp_path / "batch"
    batch.write_text(
        f"mkdir {remote}\n"
        f"put {tmp_path / 'mine' / 'data.bin'} {remote}/data.bin\n"
        f"put {tmp_path / 'mine' / 'notes.txt'} {remote}/notes.txt\n"
        f"ls -1 {remote}\n"
        f"get {remote}/data.bin {back}/data.bin\n"
        f"get {remote}/notes.txt {back}/notes.txt\n"
    )

    result = client.sftp("alice", "root@login", batch)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    listed = lines[lines.index(f"sftp> ls -1 {remote}") + 1 :][:2]
    assert listed == [f"{remote}/data.bin", f"{remote}/notes.txt"]
    for name, content in files.items():
        assert (remote / name).read_bytes() == content
        assert (back / name).read_bytes() == content


def _transferred(stats: str) -> int:
    """`Number of regular files transferred: N` from rsync --stats."""
    (line,) = [line for line in stats.splitlines() if line.startswith("Number of regular files transferred:")]
    return int(line.split(":")[1].replace(",", ""))


def test_rsync_round_trip_and_a_second_run_sends_nothing(scenario: GatewayScenario, tmp_path: Path) -> None:
    """`rsync -e 'ssh -J ...'`: rsync at both ends (the pod's runs over ssh), byte-identical copies,
    and the second run finds everything in place."""
    scenario.open_for_alice()
    client = scenario.client(scenario.alice)
    files = _files_to_copy(tmp_path / "mine")
    remote = tmp_path / "on-the-pod"
    back = tmp_path / "back"

    first = client.rsync("alice", "-a", "--stats", f"{tmp_path / 'mine'}/", f"root@login:{remote}/")
    second = client.rsync("alice", "-a", "--stats", f"{tmp_path / 'mine'}/", f"root@login:{remote}/")
    down = client.rsync("alice", "-a", f"root@login:{remote}/", f"{back}/")

    assert first.returncode == 0, first.stderr
    assert _transferred(first.stdout) == 2
    assert second.returncode == 0, second.stderr
    assert _transferred(second.stdout) == 0
    assert down.returncode == 0, down.stderr
    for name, content in files.items():
        assert (remote / name).read_bytes() == content
        assert (back / name).read_bytes() == content


def _hold(client: SshClient, user: str, pod: str) -> subprocess.Popen[str]:
    """An `ssh -J` session that prints `ready` once in the pod and then stays."""
    return client.popen("-J", client.jump(user), f"root@{pod}", "echo ready; exec sleep 600")


def test_fifty_parallel_sessions_are_held(scenario: GatewayScenario) -> None:
    api = scenario.api
    gateway = scenario.open_for_alice(max_sessions_per_person=50)
    client = scenario.client(scenario.alice)
    sessions = [_hold(client, "alice", "login") for _ in range(50)]
    try:
        for session in sessions:
            assert session.stdout is not None
            assert session.stdout.readline() == "ready\n"
        assert gateway.tunnels() == 50
        assert all(session.poll() is None for session in sessions)
        api.wait_for(lambda: bool(api.heartbeats) and len(api.heartbeats[-1]["sessions"]) == 50)
        reported = api.heartbeats[-1]["sessions"]
        assert {(s["kind"], s["name"], s["username"]) for s in reported} == {("user", "alice", "alice")}

        over = client.ssh("alice", "login", "whoami")  # the 51st
        assert over.returncode == 255
        assert "you already hold 50 sessions through the gateway" in over.stderr
    finally:
        for session in sessions:
            session.terminate()
        for session in sessions:
            session.wait()


def test_over_max_connections_the_gateway_is_busy(scenario: GatewayScenario) -> None:
    gateway = scenario.open_for_alice(max_connections=2)
    client = scenario.client(scenario.alice)
    held = [client.popen("-N", "-p", str(gateway.port), "alice@127.0.0.1") for _ in range(2)]
    try:
        scenario.api.wait_for(lambda: len(scenario.events("login")) == 2)

        busy = client.ssh("alice", "login", "whoami")

        assert busy.returncode == 255
        assert "gateway busy, try again in a minute" in busy.stderr
        assert all(connection.poll() is None for connection in held)  # nobody dropped to admit it
    finally:
        for connection in held:
            connection.terminate()
            connection.wait()


def test_too_many_keys_offered_disconnects(scenario: GatewayScenario) -> None:
    api = scenario.api
    scenario.route_alice()
    gateway = scenario.start_gateway(max_auth_tries=2)
    third = scenario.keys_dir / "third"
    if not third.exists():
        keygen(third)

    # OpenSSH offers the -i keys first, then the config's (alice's own): hers comes third.
    result = scenario.client(scenario.alice).direct(
        "-i", str(scenario.bob.key), "-i", str(third), "-p", str(gateway.port), "alice@127.0.0.1", "true"
    )

    assert result.returncode == 255
    assert "too many authentication failures" in result.stderr
    api.wait_for(lambda: bool(api.events))
    assert [(e["event"], e["reason"]) for e in api.events] == [("refused", "wrong_key")]


def _server_closes(sock: socket.socket) -> bytes:
    """Everything the gateway sends on this socket until it closes it."""
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received


def test_slow_handshakes_are_cut_and_a_flood_is_dropped_without_one(scenario: GatewayScenario) -> None:
    gateway = scenario.start_gateway(max_connections=1, login_grace_seconds=1)
    address = ("127.0.0.1", gateway.port)
    with socket.create_connection(address) as first, socket.create_connection(address) as second:
        first.settimeout(60)
        second.settimeout(60)
        first.recv(64)  # the gateway's version line: both are open (one admitted, one busy)
        second.recv(64)
        with socket.create_connection(address) as third:
            third.settimeout(60)
            assert _server_closes(third) == b""  # twice the limit open: closed, no handshake at all
        # Neither client ever answered: login_grace_seconds closes both.
        assert not _server_closes(first).startswith(b"SSH-")
        assert not _server_closes(second).startswith(b"SSH-")


def test_flow_control_holds_a_fast_sender_to_a_slow_pod(scenario: GatewayScenario) -> None:
    """32 MiB from the client into a pod that reads 64 KiB at a time: the gateway never holds more
    than a little of it (without flow control it would queue what the client sends faster than the
    pod reads), and every byte arrives in order."""
    payload = os.urandom(1 << 20) * 32
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        scenario.route_alice_to(port)
        gateway = scenario.start_gateway()
        client = scenario.client(scenario.alice)
        sender = client.popen_bytes("-W", "login:22", "-p", str(gateway.port), "alice@127.0.0.1")
        stdin = sender.stdin
        assert stdin is not None

        def write() -> None:
            stdin.write(payload)
            stdin.close()

        writer = threading.Thread(target=write)
        writer.start()
        connection, _ = listener.accept()
        received = hashlib.sha256()
        total, most_held = 0, 0
        with connection:
            while chunk := connection.recv(65536):
                received.update(chunk)
                total += len(chunk)
                most_held = max(most_held, gateway.call(gateway.gateway.buffered_bytes))
        writer.join()
        sender.wait()

    assert total == len(payload)
    assert received.digest() == hashlib.sha256(payload).digest()
    assert 0 < most_held <= 1 << 20  # it did hold some: the pod was the slow side


def test_flow_control_holds_a_fast_pod_to_a_slow_client(scenario: GatewayScenario) -> None:
    """The other way: the pod sends 32 MiB at once, the client reads 64 KiB at a time."""
    payload = os.urandom(1 << 20) * 32
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        scenario.route_alice_to(port)
        gateway = scenario.start_gateway()
        client = scenario.client(scenario.alice)
        receiver = client.popen_reader("-W", "login:22", "-p", str(gateway.port), "alice@127.0.0.1")

        def send() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.sendall(payload)
                connection.shutdown(socket.SHUT_WR)
                while connection.recv(65536):  # until the client's EOF
                    pass

        sender = threading.Thread(target=send)
        sender.start()
        assert receiver.stdout is not None
        received = hashlib.sha256()
        total, most_held = 0, 0
        while chunk := os.read(receiver.stdout.fileno(), 65536):
            received.update(chunk)
            total += len(chunk)
            most_held = max(most_held, gateway.call(gateway.gateway.buffered_bytes))
        sender.join()
        receiver.wait()

    assert total == len(payload)
    assert received.digest() == hashlib.sha256(payload).digest()
    assert 0 < most_held <= 1 << 20


def test_a_suspension_stops_new_tunnels_on_a_connection_already_in(
    scenario: GatewayScenario, tmp_path: Path
) -> None:
    """One outer connection (OpenSSH's ControlMaster) opens a tunnel, the person is suspended, the
    next tunnel on the same connection is refused."""
    api = scenario.api
    gateway = scenario.open_for_alice(route_cache_seconds=0)
    client = scenario.client(scenario.alice)
    control = ["-o", f"ControlPath={tmp_path / 'control'}", "-p", str(gateway.port), "alice@127.0.0.1"]
    master = client.popen("-o", "ControlMaster=yes", "-N", *control)
    try:
        api.wait_for(lambda: bool(scenario.events("login")))
        probe = ["-o", "ControlMaster=no", "-W", "login:22", *control]
        before = client.direct(*probe, stdin="")
        assert before.stdout.startswith("SSH-2.0-OpenSSH")  # the pod's sshd, through the master

        del api.routes["alice"]
        api.refusal_reasons["alice"] = "inactive"
        after = client.direct(*probe, stdin="")

        assert after.returncode == 255
        assert "open refused" in after.stderr  # through a master, OpenSSH prints no reason
        assert not after.stdout.startswith("SSH-2.0-")
        api.wait_for(lambda: bool(scenario.events("refused")))
        assert [(e["reason"], e["pod"]) for e in scenario.events("refused")] == [("no_such_pod", "login")]
        assert master.poll() is None
    finally:
        master.terminate()
        master.wait()
