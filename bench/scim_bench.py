"""SCIM benchmark: a real `sup serve` on a real PostgreSQL holding 10,000 SCIM users.

    .venv/bin/python bench/scim_bench.py [--users 10000] [--seconds 20] [--clients 8]

Starts its own PostgreSQL (tests/support/postgres.py), migrates it, fills it with `--users` users
created through SCIM's own storage (so each has a userName, a SCIM id, emails and attributes), starts
one `sup serve` process, and measures over HTTP from this process:
1. throughput of `GET /Users?filter=userName eq "..."` (random existing users), `--clients` threads;
2. throughput of `PATCH /Users/{id}` (replace displayName with a new value each time);
3. latency at a fixed 25 requests/s (Entra ID's minimum) of the same GET, as p50/p99.
Prints a Markdown table. Not a test: nothing here asserts a time. The push-to-login latency (SCIM
POST until getent succeeds through sssd) needs the reconciler's outbox worker and is not measured here.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from sup.config import Settings
from sup.scim.provider import build_provider
from sup.scim.schemas import ScimUser
from sup.scim.storage import SqlStorage
from sup.store import migrate
from sup.store.audit import Actor
from sup.store.session import make_engine, make_sessionmaker
from tests.support.cli import run_sup, sup_env
from tests.support.postgres import PostgresServer
from tests.support.server import SupServer

CONNECTION = "bench"


def fill(url: str, users: int) -> None:
    settings = Settings(database_url=url)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    actor = Actor(name=CONNECTION, role="scim")
    provider = build_provider(settings)
    user_type = provider.resource_types[0]
    with provider:
        for start in range(0, users, 1000):
            with sessions.begin() as session:
                storage = SqlStorage(session, settings, actor, CONNECTION)
                for i in range(start, min(users, start + 1000)):
                    resource = ScimUser.model_validate(
                        {
                            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
                            "userName": f"User.{i:05d}@corp.example",
                            "externalId": f"00u{i:08d}",
                            "name": {"givenName": "User", "familyName": f"N{i}"},
                            "displayName": f"User {i}",
                            "emails": [
                                {"value": f"user.{i:05d}@corp.example", "type": "work", "primary": True}
                            ],
                            "title": "Researcher",
                        }
                    )
                    storage.create(user_type, resource)
            print(f"  filled {min(users, start + 1000)} users", file=sys.stderr, flush=True)
    engine.dispose()


def throughput(
    seconds: float, clients: int, request: Callable[[httpx.Client, random.Random], int], base: str, token: str
) -> tuple[float, int]:
    deadline = time.perf_counter() + seconds
    counts = [0] * clients
    errors = [0] * clients

    def worker(index: int) -> None:
        rng = random.Random(index)  # noqa: S311 - a sample, not a secret
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            while time.perf_counter() < deadline:
                status = request(http, rng)
                counts[index] += 1
                if status >= 400:
                    errors[index] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started), sum(errors)


def paced_latencies(
    rate: float, seconds: float, request: Callable[[httpx.Client, random.Random], int], base: str, token: str
) -> list[float]:
    """Requests started every 1/rate s (each in its own thread, so a slow one does not delay the next)."""
    latencies: list[float] = []
    lock = threading.Lock()
    threads: list[threading.Thread] = []
    http = httpx.Client(
        base_url=base,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
    )
    rng = random.Random(99)  # noqa: S311

    def one() -> None:
        started = time.perf_counter()
        request(http, rng)
        with lock:
            latencies.append(time.perf_counter() - started)

    begin = time.perf_counter()
    for n in range(int(rate * seconds)):
        delay = begin + n / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        thread = threading.Thread(target=one)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    http.close()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=10000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()

    postgres = PostgresServer()
    postgres.start()
    workdir = Path(tempfile.mkdtemp(prefix="sup-scim-bench-"))
    server: SupServer | None = None
    try:
        url = postgres.create_database("scim_bench")
        migrate.upgrade(url)
        started = time.perf_counter()
        fill(url, args.users)
        fill_seconds = time.perf_counter() - started
        env = sup_env(
            SUP_DATABASE_URL=url,
            SUP_SCIM__RATE_LIMIT__REQUESTS_PER_SECOND="100000",
            SUP_SCIM__RATE_LIMIT__BURST="100000",
        )
        token = run_sup("token", "create", "--name", CONNECTION, "--role", "scim", env=env).stdout.strip()
        server = SupServer(env, workdir / "serve.log")
        base = f"{server.url}/scim/v2"
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
            ids = [
                r["id"]
                for r in http.get("/Users", params={"count": "1000", "attributes": "id"}).json()["Resources"]
            ]

        def get(http: httpx.Client, rng: random.Random) -> int:
            name = f"USER.{rng.randrange(args.users):05d}@CORP.EXAMPLE"  # Okta's upper case
            response = http.get("/Users", params={"filter": f'userName eq "{name}"'})
            assert response.json()["totalResults"] == 1, response.text
            return response.status_code

        def patch(http: httpx.Client, rng: random.Random) -> int:
            body = {
                "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                "Operations": [{"op": "replace", "path": "displayName", "value": f"User {rng.random()}"}],
            }
            return http.patch(f"/Users/{rng.choice(ids)}", json=body).status_code

        throughput(2, args.clients, get, base, token)  # warm up
        get_rate, get_errors = throughput(args.seconds, args.clients, get, base, token)
        patch_rate, patch_errors = throughput(args.seconds, args.clients, patch, base, token)
        latencies = sorted(paced_latencies(25, args.seconds, get, base, token))
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
        print(f"\n{args.users} users in PostgreSQL, one `sup serve` process, {args.clients} client threads")
        print(f"(filled through SCIM's storage in {fill_seconds:.1f} s)\n")
        print("| measurement | result |")
        print("|---|---:|")
        get_row = f"{get_rate:,.0f} requests/s ({get_errors} errors)"
        print(f'| `GET /Users?filter=userName eq "..."` throughput | {get_row} |')
        patch_row = f"{patch_rate:,.0f} requests/s ({patch_errors} errors)"
        print(f"| `PATCH /Users/{{id}}` (displayName) throughput | {patch_row} |")
        print(f"| GET latency at 25 requests/s, p50 | {p50:.1f} ms |")
        print(f"| GET latency at 25 requests/s, p99 | {p99:.1f} ms |")
    finally:
        if server is not None:
            server.stop()
        postgres.stop()


if __name__ == "__main__":
    main()
