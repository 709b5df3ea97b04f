"""`sup serve` as real processes against the real PostgreSQL: replicas never hand out the same id."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from sup.api.token_cache import TOKEN_CACHE_SECONDS
from tests.support.cli import run_sup, sup_env
from tests.support.server import SupServer


@pytest.fixture
def two_replicas(
    postgres_template: str, new_postgres_database: Callable[[bool], str], tmp_path: Path
) -> Iterator[tuple[list[SupServer], str]]:
    env = sup_env(SUP_DATABASE_URL=new_postgres_database(True))
    token = run_sup("token", "create", "--name", "loadtest", "--role", "operator", env=env).stdout.strip()
    servers = [SupServer(env, tmp_path / f"serve{i}.log") for i in range(2)]
    try:
        yield servers, token
    finally:
        for server in servers:
            server.stop()


@pytest.mark.postgres
def test_parallel_creates_through_two_replicas(two_replicas: tuple[list[SupServer], str]) -> None:
    servers, token = two_replicas
    headers = {"Authorization": f"Bearer {token}"}

    def create(i: int) -> tuple[int, dict[str, object]]:
        server = servers[i % 2]
        kind = "groups" if i % 4 == 3 else "users"
        body = {"name": f"g{i}"} if kind == "groups" else {"username": f"user{i}"}
        response = httpx.post(f"{server.url}/api/v1/{kind}", json=body, headers=headers, timeout=60)
        return response.status_code, response.json()

    with ThreadPoolExecutor(max_workers=24) as pool:
        results = list(pool.map(create, range(200)))
    assert [status for status, _ in results] == [201] * 200, [r for r in results if r[0] != 201][:3]

    users = [body for _, body in results if "username" in body]
    groups = [body for _, body in results if "name" in body]
    uids = [u["uid_number"] for u in users]
    gids = [u["primary_gid"] for u in users] + [g["gid_number"] for g in groups]
    assert len(set(uids)) == len(uids) == 150
    assert len(set(gids)) == len(gids) == 200
    listed = httpx.get(f"{servers[0].url}/api/v1/users", params={"limit": 1000}, headers=headers).json()
    assert listed["total"] == 150


@pytest.mark.postgres
def test_same_username_raced_on_two_replicas_creates_one(two_replicas: tuple[list[SupServer], str]) -> None:
    servers, token = two_replicas
    headers = {"Authorization": f"Bearer {token}"}

    def create(i: int) -> int:
        response = httpx.post(
            f"{servers[i % 2].url}/api/v1/users", json={"username": "contested"}, headers=headers, timeout=60
        )
        return response.status_code

    with ThreadPoolExecutor(max_workers=10) as pool:
        statuses = sorted(pool.map(create, range(10)))
    assert statuses == [201] + [409] * 9


def _role(server: SupServer) -> str:
    return str(httpx.get(f"{server.url}/readyz", timeout=5).json()["reconciler"]["role"])


@pytest.mark.postgres
def test_one_replica_reconciles_and_a_killed_leader_hands_over(
    postgres_template: str, new_postgres_database: Callable[[bool], str], tmp_path: Path
) -> None:
    env = sup_env(SUP_DATABASE_URL=new_postgres_database(True), SUP_RECONCILE__LEADER_RETRY_SECONDS="0.5")
    first = SupServer(env, tmp_path / "first.log")
    second: SupServer | None = None
    try:
        _wait_for(lambda: _role(first) == "leader")
        second = SupServer(env, tmp_path / "second.log")
        _wait_for(lambda: _role(second) == "standby")
        first.process.kill()  # SIGKILL: no chance to release anything politely
        first.process.wait()
        _wait_for(lambda: _role(second) == "leader", timeout=15)
    finally:
        first.stop()
        if second is not None:
            second.stop()


def _wait_for(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")  # a zombie is gone too
    except FileNotFoundError:
        return True


@pytest.mark.postgres
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_workers_share_the_port_one_reconciles_and_all_stop_together(
    postgres_template: str,
    new_postgres_database: Callable[[bool], str],
    tmp_path: Path,
    stop_signal: signal.Signals,
) -> None:
    env = sup_env(SUP_DATABASE_URL=new_postgres_database(True))
    server = SupServer(env, tmp_path / "serve.log", args=["--workers", "2"])
    try:
        workers = _children(server.process.pid)
        assert len(workers) == 2
        roles: set[str] = set()
        deadline = time.monotonic() + 15
        while roles != {"leader", "off"} and time.monotonic() < deadline:
            roles.add(_role(server))  # a new connection each time: the kernel picks a worker
        # Both answer; one runs the reconciler (leader) and the other none (not a standby for it).
        assert roles == {"leader", "off"}
        server.process.send_signal(stop_signal)
        assert server.process.wait(timeout=40) == 0
        _wait_for(lambda: all(_gone(pid) for pid in workers), timeout=10)
    finally:
        server.stop()


@pytest.mark.postgres
def test_a_token_revoked_by_another_process_stops_working_on_every_worker(
    postgres_template: str, new_postgres_database: Callable[[bool], str], tmp_path: Path
) -> None:
    env = sup_env(SUP_DATABASE_URL=new_postgres_database(True))
    token = run_sup("token", "create", "--name", "idp", "--role", "scim", env=env).stdout.strip()
    headers = {"Authorization": f"Bearer {token}"}
    server = SupServer(env, tmp_path / "serve.log", args=["--workers", "2"])
    try:
        for _ in range(10):  # every worker caches it
            assert httpx.get(f"{server.url}/scim/v2/Users", headers=headers, timeout=10).status_code == 200
        assert run_sup("token", "revoke", "idp", env=env).returncode == 0
        revoked = time.monotonic()
        _wait_for(
            lambda: httpx.get(f"{server.url}/scim/v2/Users", headers=headers, timeout=10).status_code == 401,
            timeout=TOKEN_CACHE_SECONDS + 5,
        )
        # From TOKEN_CACHE_SECONDS after the revocation, no worker accepts it any more.
        time.sleep(max(0.0, revoked + TOKEN_CACHE_SECONDS - time.monotonic()))
        statuses = {
            httpx.get(f"{server.url}/scim/v2/Users", headers=headers, timeout=10).status_code
            for _ in range(20)
        }
        assert statuses == {401}
    finally:
        server.stop()


def test_workers_refuse_sqlite(tmp_path: Path) -> None:
    env = sup_env(SUP_DATABASE_URL=f"sqlite:///{tmp_path / 'sup.db'}")
    assert run_sup("db", "upgrade", env=env).returncode == 0
    refused = run_sup("serve", "--workers", "2", "--port", "1", env=env, timeout=60)
    assert refused.returncode == 2
    assert "PostgreSQL" in refused.stderr
