"""The load generator of bench/gateway_bench.py's capacity part, in a process of its own (so its CPU is
not the gateway's, and the bench can pin it to another core than the gateway's).

    python bench/gateway_load.py echo PORT          a TCP echo server standing in for a pod
    python bench/gateway_load.py load CONFIG.json   the client side; one JSON object per line on stdout

The client side is asyncssh: per connection what `ssh -J` does on its outer connection (key
exchange, publickey auth, a `direct-tcpip` channel to a pod by name), then one byte through the
tunnel to the echo pod and back, which proves the relay reached the pod. Phases (CONFIG keys):
  idle       `samples` sequential connections, nothing else going on: connection latency
  hold       `held` connections with an open tunnel each, kept, `ramp_parallel` opening at once
  idle_held  the same sequential connections with those held
  steps      per offered rate in `rates`: connections started open loop at that rate for
             `step_seconds` (not waiting for each other), latency and failures; then every held
             tunnel must echo a byte (dropped held sessions)
  overload   against a second gateway (`overload_port`, a low max_connections): `overload_held`
             held there, then `ssh -J` (OpenSSH, its stderr captured), a burst of `burst` connections
             at once (each one's outcome: tunnel, "gateway busy", dropped), `ssh -J` again, and the
             held tunnels of both gateways checked.
Not a test: nothing here asserts a time."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
TIMEOUT = 60.0  # one connection, beyond which it counts as failed


def cpu_seconds(pid: int | str = "self") -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mib(target: Any) -> float:
    total = 0.0
    for pid in target.pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) / 1024
    return total


class Pids:
    """The gateway's processes (`gateway.workers` children, or the one process): CPU and RSS summed."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids


def cpu_of(target: Pids | str) -> float:
    return sum(cpu_seconds(pid) for pid in target.pids) if isinstance(target, Pids) else cpu_seconds(target)


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] if ordered else float("nan")


def emit(**record: Any) -> None:
    print(json.dumps(record), flush=True)


# -- the echo pod -------------------------------------------------------------------------------


class Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


async def echo_server(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", port, backlog=2048)
    async with server:
        await server.serve_forever()


# -- the client -----------------------------------------------------------------------------------


class Probe(asyncssh.SSHTCPSession[bytes]):
    """A tunnel to the echo pod: `ping()` sends one byte and waits for it to come back."""

    def __init__(self) -> None:
        self.chan: asyncssh.SSHTCPChannel[bytes] | None = None
        self._waiting: asyncio.Future[None] | None = None
        self.lost = False

    def connection_made(self, chan: asyncssh.SSHTCPChannel[bytes]) -> None:
        self.chan = chan

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if self._waiting is not None and not self._waiting.done():
            self._waiting.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self._waiting is not None and not self._waiting.done():
            self._waiting.set_exception(ConnectionError("tunnel closed"))

    async def ping(self, timeout: float = 20) -> None:
        assert self.chan is not None
        self._waiting = asyncio.get_running_loop().create_future()
        self.chan.write(b"x")
        await asyncio.wait_for(self._waiting, timeout)


@dataclass
class Client:
    port: int
    key: asyncssh.SSHKey
    users: list[str]
    pod: str
    turn: int = 0
    held: list[tuple[asyncssh.SSHClientConnection, Probe]] = field(default_factory=list)

    def next_user(self) -> str:
        self.turn += 1
        return self.users[self.turn % len(self.users)]

    async def open(self, port: int | None = None) -> tuple[asyncssh.SSHClientConnection, Probe]:
        conn = await asyncssh.connect(
            "127.0.0.1",
            port or self.port,
            username=self.next_user(),
            client_keys=[self.key],
            known_hosts=None,
            agent_path=None,
            config=[],
            preferred_auth="publickey",
        )
        try:
            _, session = await conn.create_connection(Probe, self.pod, 22)
            assert isinstance(session, Probe)
            probe = session
            await probe.ping()
        except BaseException:
            conn.abort()
            raise
        return conn, probe

    async def once(self, port: int | None = None) -> tuple[float | None, str]:
        """One connection, tunnel, byte and back, closed: (seconds, "ok") or (None, what failed)."""
        started = time.perf_counter()
        try:
            conn, _ = await asyncio.wait_for(self.open(port), TIMEOUT)
        except asyncssh.DisconnectError as exc:
            return None, f"disconnect: {exc.reason}"
        except asyncssh.ChannelOpenError as exc:
            return None, f"open failed: {exc.reason}"
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            return None, f"{type(exc).__name__}: {exc}"[:120]
        elapsed = time.perf_counter() - started
        conn.close()
        return elapsed, "ok"

    async def sequential(self, samples: int) -> dict[str, Any]:
        times = []
        for _ in range(samples):
            elapsed, what = await self.once()
            if elapsed is None:
                raise SystemExit(f"a sequential connection failed: {what}")
            times.append(elapsed)
        return {"median_ms": statistics.median(times) * 1000, "p95_ms": p95(times) * 1000}

    async def alive(self, held: list[tuple[asyncssh.SSHClientConnection, Probe]]) -> int:
        """How many held tunnels no longer echo."""
        gate = asyncio.Semaphore(200)

        async def check(probe: Probe) -> bool:
            async with gate:
                try:
                    await probe.ping()
                    return True
                except (ConnectionError, TimeoutError, OSError):
                    return False

        results = await asyncio.gather(*(check(probe) for _, probe in held))
        return results.count(False)


async def hold(
    client: Client, count: int, parallel: int, port: int | None = None
) -> tuple[list[Any], list[str]]:
    gate = asyncio.Semaphore(parallel)
    failures: list[str] = []
    held: list[Any] = []

    async def one() -> None:
        async with gate:
            try:
                held.append(await asyncio.wait_for(client.open(port), TIMEOUT))
            except (OSError, asyncssh.Error, TimeoutError) as exc:
                failures.append(f"{type(exc).__name__}: {exc}"[:120])

    await asyncio.gather(*(one() for _ in range(count)))
    return held, failures


async def step(client: Client, rate: float, seconds: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    count = round(rate * seconds)
    tasks = []
    worst_lag = 0.0
    start = loop.time() + 0.05
    for k in range(count):
        delay = start + k / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        worst_lag = max(worst_lag, -delay)
        tasks.append(asyncio.create_task(client.once()))
    offered_for = loop.time() - start
    results = await asyncio.gather(*tasks)
    finished = loop.time() - start
    times = [elapsed for elapsed, _ in results if elapsed is not None]
    failures: dict[str, int] = {}
    for elapsed, what in results:
        if elapsed is None:
            failures[what] = failures.get(what, 0) + 1
    return {
        "offered": count,
        "offered_seconds": offered_for,
        "all_done_seconds": finished,
        "ok": len(times),
        "failures": failures,
        "median_ms": statistics.median(times) * 1000 if times else None,
        "p95_ms": p95(times) * 1000 if times else None,
        "start_lag_max_ms": worst_lag * 1000,
    }


def run_ssh(argv: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)  # noqa: S603
    return {
        "exit": done.returncode,
        "seconds": time.perf_counter() - started,
        "stdout": done.stdout.strip(),
        "stderr": done.stderr.strip(),
    }


async def overload(client: Client, config: dict[str, Any], main_held: list[Any]) -> None:
    port = config["overload_port"]
    held, failures = await hold(client, config["overload_held"], 10, port)
    emit(phase="overload_hold", held=len(held), failures=failures[:3], failed=len(failures))
    loop = asyncio.get_running_loop()
    full = await loop.run_in_executor(None, run_ssh, config["overload_ssh"])
    emit(phase="overload_ssh_full", **full)
    burst = [asyncio.create_task(client.once(port)) for _ in range(config["burst"])]
    during = loop.run_in_executor(None, run_ssh, config["overload_ssh"])
    results = await asyncio.gather(*burst)
    outcomes: dict[str, int] = {}
    for _, what in results:
        outcomes[what] = outcomes.get(what, 0) + 1
    emit(phase="overload_burst", burst=config["burst"], outcomes=outcomes, ssh_during=await during)
    emit(
        phase="overload_alive",
        overload_held=len(held),
        overload_dropped=await client.alive(held),
        main_held=len(main_held),
        main_dropped=await client.alive(main_held),
    )
    for conn, _ in held:
        conn.close()


async def load(config: dict[str, Any]) -> None:
    gateway = Pids(config["gateway_pids"])
    key = asyncssh.read_private_key(config["key"])
    client = Client(config["port"], key, config["users"], config["pod"])
    emit(phase="idle", **await client.sequential(config["samples"]))

    rss0, cpu0, mine0 = rss_mib(gateway), cpu_of(gateway), cpu_seconds()
    started = time.perf_counter()
    held, failures = await hold(client, config["held"], config["ramp_parallel"])
    ramp = time.perf_counter() - started
    emit(
        phase="hold",
        held=len(held),
        failed=len(failures),
        failures=failures[:3],
        ramp_seconds=ramp,
        gateway_rss_before=rss0,
        gateway_rss_after=rss_mib(gateway),
        gateway_cpu=cpu_of(gateway) - cpu0,
        client_cpu=cpu_seconds() - mine0,
    )
    emit(phase="idle_held", dropped=await client.alive(held), **await client.sequential(config["samples"]))

    for rate in config["rates"]:
        cpu0, mine0, wall0 = cpu_of(gateway), cpu_seconds(), time.perf_counter()
        result = await step(client, rate, config["step_seconds"])
        wall = time.perf_counter() - wall0
        gw_cpu, my_cpu = cpu_of(gateway) - cpu0, cpu_seconds() - mine0
        dropped = await client.alive(held)
        emit(
            phase="step",
            rate=rate,
            **result,
            wall_seconds=wall,
            gateway_cpu=gw_cpu,
            client_cpu=my_cpu,
            gateway_rss=rss_mib(gateway),
            held_dropped=dropped,
        )

    if config.get("overload_port"):
        await overload(client, config, held)
    for conn, _ in held:
        conn.close()


def main() -> None:
    if sys.argv[1] == "echo":
        asyncio.run(echo_server(int(sys.argv[2])))
    else:
        asyncio.run(load(json.loads(Path(sys.argv[2]).read_text())))


if __name__ == "__main__":
    main()
