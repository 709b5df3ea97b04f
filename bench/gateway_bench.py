"""The SSH gateway (issue 18): what a hop through `sup gateway` costs, how many sessions it holds,
how many new connections per second it takes.

    .venv/bin/python bench/gateway_bench.py [--samples 40] [--sessions 100] [--seconds 10] [--clients 4]
        [--parts abcde] [--held 1000] [--rates 10,25,50,75,100,150] [--step-seconds 10] [--people 200]
        [--overload-max 50] [--burst 300] [--gateway-cpus 0] [--client-cpus 1] [--workers 1] [--profile F]
        [--attempts 20] [--flood-held 2500] [--flood-rate 300]

Starts, as tests/gateway does: a stand-in of SUP's /api/v1/gateway (tests/support/gateway_api.py),
a real sshd on loopback as the login pod (tests/support/sshd.py), and `sup gateway` as its own
process (so its CPU time and memory are its own, read from /proc). Then, with OpenSSH's client:
  (a) connection latency, `ssh root@pod true` direct vs `ssh -J alice@gateway root@login true`,
      alternating, `--samples` each: median and p95, and the difference;
  (b) `--sessions` sessions held at once through the gateway (`ssh -J ... sleep`): the gateway's
      resident memory before and after, its CPU time to set them up, and one more connection's
      latency while they are held;
  (c) new connections per second: `--clients` loops of `ssh alice@gateway` (key exchange, publickey
      auth, a session channel answered with the help text) for `--seconds`: the rate reached and
      the gateway's CPU time per connection (the OpenSSH clients, not the gateway, use most of the
      CPU here: the rate is what this machine's clients reach, the CPU per connection is the
      gateway's own);
  (d) bulk copy: `--megabytes` through one tunnel (`ssh -J ... cat > /dev/null`), the rate and the
      gateway's peak memory (flow control keeps it flat).
  (e) capacity, with asyncssh clients (bench/gateway_load.py, its own process; its docstring says
      what one connection does): a fresh `sup gateway` pinned to `--gateway-cpus`, the load, an echo
      "pod" and this process (the API stand-in) to `--client-cpus`; `--held` tunnels held, then
      offered rates in steps with latency and failures, every held tunnel checked after each step,
      the rate where the median doubles; then a second gateway with `max_connections`
      `--overload-max`: what OpenSSH's `ssh -J` prints when it is full, a `--burst` at once, and
      whether the held tunnels of both survived. `--profile F`: the gateway under cProfile (slower:
      for where the CPU goes, not for the figures).
  (f) one source floods, one person connects: a fresh `sup gateway` with the default limits
      (per process and per source), then one with the per-source limits lifted to the process's
      (as before there were any); on each, `--attempts` sequential `ssh -J alice@gateway root@login
      true` from 127.0.0.1 alone, then again while 127.0.0.2 holds `--flood-held` connections that
      never authenticate and opens and closes `--flood-rate` more per second: how many landed, and
      their median and p95.
Parts (a) to (e) connect from 127.0.0.1 only, as many people would: there the per-source limits
are lifted to the process's.
Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.cli import sup_env, sup_executable
from tests.support.gateway_api import TOKEN, GatewayApiStandIn, pod
from tests.support.gateway_runner import write_host_key
from tests.support.ports import free_port
from tests.support.sshd import SshClient, StandInPod, fingerprint, keygen, wait_listening

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, timeout=120)  # noqa: S603 - OpenSSH's client
    return time.perf_counter() - started


LOAD = Path(__file__).with_name("gateway_load.py")


def cpus(spec: str) -> set[int]:
    return {int(part) for part in spec.split(",")}


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()  # noqa: S607


def capacity(
    args: argparse.Namespace, work: Path, api: GatewayApiStandIn, login: StandInPod, env: dict[str, str]
) -> None:
    """(e) held sessions and new connections/s with asyncssh clients (bench/gateway_load.py) in their
    own process, the gateway pinned to `--gateway-cpus`, everything else here to `--client-cpus`."""
    os.sched_setaffinity(0, cpus(args.client_cpus))  # this process answers as SUP's API
    pin_client = ["taskset", "-c", args.client_cpus, sys.executable, str(LOAD)]
    pin_gateway = ["taskset", "-c", args.gateway_cpus]
    echo_port = free_port()
    echo = subprocess.Popen([*pin_client, "echo", str(echo_port)])  # noqa: S603
    key_fingerprint = fingerprint(work / "alice.pub")
    users = [f"p{i}" for i in range(args.people)]
    for user in ["alice", *users]:
        api.routes[user] = {
            "username": user,
            "fingerprints": [key_fingerprint],
            "pods": [pod("login", user, login.port), pod("echo", "echo", echo_port, kind="group")],
        }

    def start(port: int, max_connections: int, workers: int, profile: Path | None) -> subprocess.Popen[bytes]:
        settings = {
            **env,
            "SUP_GATEWAY__LISTEN_PORT": str(port),
            "SUP_GATEWAY__METRICS_PORT": str(free_port()),
            "SUP_GATEWAY__MAX_CONNECTIONS": str(max_connections),
            "SUP_GATEWAY__MAX_SESSIONS_PER_PERSON": str(args.held + 100),
            "SUP_GATEWAY__WORKERS": str(workers),
        }
        argv = [sup_executable(), "gateway", "--log-level", "warning"]
        if profile is not None:
            run = (
                "import cProfile, sys; sys.argv = ['sup', 'gateway', '--log-level', 'warning']; "
                f"from sup.cli import main; cProfile.run('main()', {str(profile)!r})"
            )
            argv = [sys.executable, "-c", run]
        return subprocess.Popen([*pin_gateway, *argv], env=settings)  # noqa: S603

    port, overload_port = free_port(), free_port()
    gateway = start(port, args.held + 1000, args.workers, args.profile)
    overloaded = start(overload_port, args.overload_max, 1, None)
    records: list[dict[str, Any]] = []
    try:
        wait_listening(port, gateway)
        wait_listening(overload_port, overloaded)
        wait_listening(echo_port, echo)
        pids = children(gateway.pid) if args.workers > 1 else [gateway.pid]
        ssh_full = SshClient(work, work / "alice", overload_port)
        config = {
            "gateway_pids": pids,
            "port": port,
            "key": str(work / "alice"),
            "users": users,
            "pod": "echo",
            "samples": 20,
            "held": args.held,
            "ramp_parallel": 50,
            "rates": [float(rate) for rate in args.rates.split(",")],
            "step_seconds": args.step_seconds,
            "overload_port": overload_port,
            "overload_held": args.overload_max,
            "overload_ssh": [
                "ssh",
                "-F",
                str(ssh_full.config),
                "-J",
                ssh_full.jump("alice"),
                "root@login",
                "true",
            ],
            "burst": args.burst,
        }
        (work / "load.json").write_text(json.dumps(config))
        print(f"(e) before: {uptime()}")
        print(
            f"(e) gateway pid(s) {pids} on CPU {args.gateway_cpus} (workers {args.workers}); load generator, "
            f"echo pod, API stand-in on CPU {args.client_cpus}; sshd unpinned",
            flush=True,
        )
        with subprocess.Popen(  # noqa: S603 - the load generator
            [*pin_client, "load", str(work / "load.json")], stdout=subprocess.PIPE, text=True
        ) as load:
            assert load.stdout is not None
            for line in load.stdout:
                record = json.loads(line)
                records.append(record)
                print(f"(e) {json.dumps(record)}", flush=True)
        print(f"(e) after: {uptime()}")
        idle = next((r for r in records if r["phase"] == "idle_held"), None)
        if idle is not None:
            doubled = next(
                (
                    r
                    for r in records
                    if r["phase"] == "step" and (r["median_ms"] or 1e9) >= 2 * idle["median_ms"]
                ),
                None,
            )
            print(
                f"(e) idle median with sessions held {idle['median_ms']:.0f} ms; median doubled at "
                + (f"{doubled['rate']:g}/s offered" if doubled else "no step offered")
            )
    finally:
        for process in (gateway, overloaded, echo):
            process.terminate()
        for process in (gateway, overloaded, echo):
            process.wait()


FLOODER = "127.0.0.2"  # loopback holds all of 127/8: another source address on this machine
LIFTED = {  # per-source limits as high as the process's: one address may take it all
    "SUP_GATEWAY__MAX_CONNECTIONS_PER_SOURCE": "100000",
    "SUP_GATEWAY__MAX_UNAUTHENTICATED_PER_SOURCE": "100000",
    "SUP_GATEWAY__MAX_NEW_PER_SECOND_PER_SOURCE": "100000",
    "SUP_GATEWAY__NEW_BURST_PER_SOURCE": "100000",
}


def attempts(argv: list[str], count: int) -> str:
    """`count` sequential runs of `argv`: how many succeeded, their median and p95."""
    took: list[float] = []
    failed = 0
    for _ in range(count):
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, timeout=120, check=False)  # noqa: S603
        if done.returncode == 0:
            took.append(time.perf_counter() - started)
        else:
            failed += 1
    if not took:
        return f"0/{count} landed"
    return (
        f"{len(took)}/{count} landed, median {statistics.median(took) * 1000:.0f} ms, "
        f"p95 {p95(took) * 1000:.0f} ms"
    )


def still_open(sock: socket.socket) -> bool:
    """Whether the gateway still holds this connection (it sent its version line and did not close)."""
    sock.setblocking(False)
    try:
        return bool(sock.recv(64, socket.MSG_PEEK))
    except BlockingIOError:
        return True
    except OSError:
        return False


class Churn(threading.Thread):
    """Opens and closes connections from FLOODER to `port` at `rate` per second until stopped (at
    most 600 s)."""

    def __init__(self, port: int, rate: float) -> None:
        super().__init__(daemon=True)
        self.port, self.pause = port, 1 / rate
        self.stop = threading.Event()
        self.opened = 0

    def run(self) -> None:
        deadline = time.monotonic() + 600
        while not self.stop.is_set() and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                socket.create_connection(
                    ("127.0.0.1", self.port), timeout=5, source_address=(FLOODER, 0)
                ).close()
            self.opened += 1
            time.sleep(self.pause)


def flood(args: argparse.Namespace, work: Path, env: dict[str, str]) -> None:
    """(f) one source floods (held unauthenticated connections and a fast open/close loop) while one
    person connects from another, with the default limits and with the per-source ones lifted."""
    defaults = {key: value for key, value in env.items() if key not in LIFTED}
    defaults["SUP_GATEWAY__MAX_NEW_PER_SECOND"] = "100"  # the default, which (a) to (d) lift
    for label, settings in (
        ("default limits", defaults),
        ("per-source limits lifted", {**defaults, **LIFTED}),
    ):
        port = free_port()
        settings = {
            **settings,
            "SUP_GATEWAY__LISTEN_PORT": str(port),
            "SUP_GATEWAY__METRICS_PORT": str(free_port()),
        }
        argv = [sup_executable(), "gateway", "--log-level", "error"]
        gateway = subprocess.Popen(argv, env=settings)  # noqa: S603
        held: list[socket.socket] = []
        churn = Churn(port, args.flood_rate)
        try:
            wait_listening(port, gateway)
            client = SshClient(work, work / "alice", port)
            through = ["ssh", "-F", str(client.config), "-J", client.jump("alice"), "root@login", "true"]
            subprocess.run(through, capture_output=True, timeout=120, check=False)  # noqa: S603
            alone = attempts(through, args.attempts)
            for _ in range(args.flood_held):
                with contextlib.suppress(OSError):
                    held.append(
                        socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(FLOODER, 0))
                    )
            churn.start()
            cpu0, started = cpu_seconds(gateway.pid), time.perf_counter()
            flooded = attempts(through, args.attempts)
            elapsed = time.perf_counter() - started
            cpu = cpu_seconds(gateway.pid) - cpu0
            churn.stop.set()
            churn.join()
            kept = sum(still_open(sock) for sock in held)
            print(
                f"(f) {label}: alone {alone}; while {FLOODER} opens {len(held)} connections that never "
                f"authenticate (the gateway kept {kept} of them) and opens and closes "
                f"{churn.opened / elapsed:.0f}/s more: {flooded} (gateway CPU {cpu / elapsed:.2f} core)",
                flush=True,
            )
        finally:
            churn.stop.set()
            for sock in held:
                sock.close()
            gateway.terminate()
            gateway.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--parts", default="abcdef", help="which parts to run (e: capacity, f: a flood)")
    parser.add_argument("--held", type=int, default=1000, help="(e) tunnels held through the rate steps")
    parser.add_argument("--rates", default="10,25,50,75,100,150", help="(e) offered new connections/s")
    parser.add_argument("--step-seconds", type=float, default=10)
    parser.add_argument("--people", type=int, default=200, help="(e) usernames the connections cycle over")
    parser.add_argument(
        "--overload-max", type=int, default=50, help="(e) max_connections of the overload gateway"
    )
    parser.add_argument("--burst", type=int, default=300, help="(e) connections at once against it")
    parser.add_argument("--gateway-cpus", default="0", help="(e) taskset CPU list of `sup gateway`")
    parser.add_argument("--client-cpus", default="1", help="(e) CPUs of the load generator, echo pod, this")
    parser.add_argument("--workers", type=int, default=1, help="(e) gateway.workers")
    parser.add_argument("--profile", type=Path, help="(e) run the gateway under cProfile, stats to this file")
    parser.add_argument("--attempts", type=int, default=20, help="(f) the person's connections, each phase")
    parser.add_argument("--flood-held", type=int, default=2500, help="(f) connections 127.0.0.2 holds")
    parser.add_argument("--flood-rate", type=float, default=300, help="(f) connections/s 127.0.0.2 opens")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="gateway-bench-"))
    public = keygen(work / "alice")
    api = GatewayApiStandIn().start()
    login = StandInPod(work / "pod", free_port(), [public])
    login.start()
    api.routes["alice"] = {
        "username": "alice",
        "fingerprints": [fingerprint(work / "alice.pub")],
        "pods": [pod("login", "alice", login.port)],
    }
    token = work / "token"
    token.write_text(TOKEN)
    port = free_port()
    env = sup_env(
        SUP_GATEWAY__SUP_URL=api.url,
        SUP_GATEWAY__TOKEN_FILE=str(token),
        SUP_GATEWAY__HOST_KEY_FILE=str(write_host_key(work / "host_key")),
        SUP_GATEWAY__LISTEN_HOST="127.0.0.1",
        SUP_GATEWAY__LISTEN_PORT=str(port),
        SUP_GATEWAY__METRICS_PORT=str(free_port()),
        SUP_GATEWAY__POD_ADDRESS="127.0.0.1",
        SUP_GATEWAY__MAX_SESSIONS_PER_PERSON=str(args.sessions + 10),
        SUP_GATEWAY__MAX_NEW_PER_SECOND="1000",
        SUP_GATEWAY__WORKERS="1",  # one process: its CPU and memory are what is reported
        SUP_LOG__FORMAT="text",
        **LIFTED,  # (a) to (e): everyone from 127.0.0.1
    )
    gateway = subprocess.Popen([sup_executable(), "gateway", "--log-level", "warning"], env=env)  # noqa: S603
    held: list[subprocess.Popen[str]] = []
    try:
        wait_listening(port, gateway)
        client = SshClient(work, work / "alice", port)
        ssh = ["ssh", "-F", str(client.config)]
        direct = [*ssh, "-p", str(login.port), "root@127.0.0.1", "true"]
        through = [*ssh, "-J", client.jump("alice"), "root@login", "true"]
        timed(direct), timed(through)  # known_hosts filled, caches warm
        print(f"gateway pid {gateway.pid}: {rss_mib(gateway.pid):.0f} MiB resident at start")

        if "a" in args.parts:
            # (a) latency
            direct_s, through_s = [], []
            for _ in range(args.samples):
                direct_s.append(timed(direct))
                through_s.append(timed(through))
            md, mt = statistics.median(direct_s), statistics.median(through_s)
            print(
                f"(a) connect+auth+`true`, {args.samples} each: direct median {md * 1000:.0f} ms p95 "
                f"{p95(direct_s) * 1000:.0f} ms; through the gateway median {mt * 1000:.0f} ms p95 "
                f"{p95(through_s) * 1000:.0f} ms; overhead median {(mt - md) * 1000:.0f} ms"
            )

        if "b" in args.parts:
            # (b) sessions held
            rss0, cpu0 = rss_mib(gateway.pid), cpu_seconds(gateway.pid)
            started = time.perf_counter()
            for _ in range(args.sessions):
                held.append(
                    client.popen("-J", client.jump("alice"), "root@login", "echo ready; exec sleep 3600")
                )
            for session in held:
                assert session.stdout is not None
                if session.stdout.readline() != "ready\n":
                    raise SystemExit(
                        f"a held session failed: {session.stderr.read() if session.stderr else ''}"
                    )
            ramp = time.perf_counter() - started
            rss1, cpu1 = rss_mib(gateway.pid), cpu_seconds(gateway.pid)
            extra = [timed(through) for _ in range(5)]
            print(
                f"(b) {args.sessions} sessions held (opened in {ramp:.1f} s): "
                f"gateway {rss0:.0f} -> {rss1:.0f} MiB "
                f"({(rss1 - rss0) * 1024 / args.sessions:.0f} KiB each), {cpu1 - cpu0:.2f} s CPU "
                f"({(cpu1 - cpu0) * 1000 / args.sessions:.1f} ms each); one more connection meanwhile: "
                f"median {statistics.median(extra) * 1000:.0f} ms"
            )
            for session in held:
                session.terminate()
            for session in held:
                session.wait()
            held.clear()

        if "c" in args.parts:
            # (c) new connections per second (a session channel: the help text, exit 1)
            plain = [*ssh, "-p", str(port), "alice@127.0.0.1", "true"]
            counts = [0] * args.clients
            deadline = time.perf_counter() + args.seconds

            def loop(index: int) -> None:
                while time.perf_counter() < deadline:
                    subprocess.run(plain, capture_output=True, timeout=120, check=False)  # noqa: S603
                    counts[index] += 1

            cpu0 = cpu_seconds(gateway.pid)
            threads = [threading.Thread(target=loop, args=(i,)) for i in range(args.clients)]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - started
            total = sum(counts)
            cpu = cpu_seconds(gateway.pid) - cpu0
            print(
                f"(c) {total} connections in {elapsed:.1f} s from {args.clients} client loops: "
                f"{total / elapsed:.0f}/s; "
                f"gateway CPU {cpu:.2f} s ({cpu * 1000 / total:.1f} ms per connection, "
                f"so one core would take about {total / cpu:.0f}/s)"
            )

        if "d" in args.parts:
            # (d) bulk copy through one tunnel
            cpu0 = cpu_seconds(gateway.pid)
            started = time.perf_counter()
            with subprocess.Popen(  # noqa: S603 - OpenSSH's client
                [*ssh, "-J", client.jump("alice"), "root@login", "cat > /dev/null"], stdin=subprocess.PIPE
            ) as copy:
                assert copy.stdin is not None
                block = os.urandom(1 << 20)
                for _ in range(args.megabytes):
                    copy.stdin.write(block)
                copy.stdin.close()
                copy.wait()
            elapsed = time.perf_counter() - started
            cpu = cpu_seconds(gateway.pid) - cpu0
            print(
                f"(d) {args.megabytes} MiB through one tunnel in {elapsed:.1f} s "
                f"({args.megabytes / elapsed:.0f} MiB/s, gateway CPU {cpu:.2f} s); "
                f"gateway peak resident {hwm_mib(gateway.pid):.0f} MiB over the whole run"
            )

        if "f" in args.parts:
            flood(args, work, env)

        if "e" in args.parts:
            gateway.terminate()
            gateway.wait()
            capacity(args, work, api, login, env)

    finally:
        for session in held:
            session.kill()
        gateway.terminate()
        gateway.wait()
        login.stop()
        api.stop()


if __name__ == "__main__":
    main()
