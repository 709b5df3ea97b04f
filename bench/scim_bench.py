"""SCIM benchmark: a real `sup serve` on a real PostgreSQL holding 10,000 SCIM users.

    .venv/bin/python bench/scim_bench.py [--users 10000] [--seconds 20] [--concurrency 16] [--workers 1,2]

Starts its own PostgreSQL (tests/support/postgres.py), migrates it, fills it with `--users` users
created through SCIM's own storage (so each has a userName, a SCIM id, emails and attributes), then
for each `--workers` count starts `sup serve --workers N` and drives it over HTTP from the compiled
load generator of bench/loadgen.py (its own process, so no Python client competes for the GIL):
1. `GET /Users?filter=userName eq "..."`: as fast as answered, `--concurrency` connections, cycling
   through filters for 1,000 random existing users (Okta's upper-case spelling); then the same
   filters in parentheses, which SUP answers through the generic search instead of the lookup's
   short path (sup/scim/lookup.py): the ratio is what the short path saves;
2. the same GET paced at 25 requests/s (Entra ID's minimum): p50/p99;
3. `PATCH /Users/{id}` replacing displayName with a new value each time (an unchanged value writes
   nothing), cycling through 1,000 users;
4. `PATCH /Groups/{id}` adding a member (a new one each time) to one of 50 groups;
5. `POST /Users` of new users (userName unique per request).
Before them, `GET /healthz` as fast as answered: what the same server, client and machine do with no
token, no store and no SCIM (the HTTP ceiling the SCIM rows compare with).
Prints a Markdown table. Not a test: nothing here asserts a time. The push-to-login latency (SCIM
POST until getent succeeds through sssd) needs the reconciler's outbox worker and is not measured here.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench.kube_bench import wide_ids
from bench.loadgen import LoadResult, run_load
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
GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group"
GROUPS = 50
MEMBER_USERS = 999


def _ids(users: int) -> dict[str, Any]:
    """Above 40,000 users the default uid range is full: ids as an operator would widen them (the
    ones scale_bench.py and kube_bench.py use), for the fill and for `sup serve` alike."""
    wide = wide_ids(users + 10_000)  # room for the POST row's new users
    return {"ids": wide} if wide else {}


def fill(url: str, users: int) -> None:
    settings = Settings.model_validate({"database_url": url, **_ids(users)})
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


def measure(
    base: str, token: str, users: int, workers: int, seconds: float, concurrency: int
) -> dict[str, LoadResult]:
    auth = {"Authorization": f"Bearer {token}"}
    rng = random.Random(workers)  # noqa: S311 - a sample, not a secret
    with httpx.Client(base_url=base, headers=auth, timeout=60) as http:
        found = http.get("/Users", params={"count": "1000", "attributes": "id"}).json()["Resources"]
        ids = [r["id"] for r in found]
        sample = f'userName eq "USER.{rng.randrange(users):05d}@CORP.EXAMPLE"'
        assert http.get("/Users", params={"filter": sample}).json()["totalResults"] == 1
        groups = []
        for g in range(GROUPS):
            created = http.post(
                "/Groups",
                json={"schemas": [GROUP_SCHEMA], "displayName": f"bench-w{workers}-g{g}"},
                headers={"Content-Type": "application/scim+json"},
            )
            created.raise_for_status()
            groups.append(created.json()["id"])
    picks = [rng.randrange(users) for _ in range(1000)]
    filters = [f"{base}/Users?filter=" + quote(f'userName eq "USER.{i:05d}@CORP.EXAMPLE"') for i in picks]
    # The same lookups in parentheses: the same answer, through the generic search (no short path).
    generic = [f"{base}/Users?filter=" + quote(f'(userName eq "USER.{i:05d}@CORP.EXAMPLE")') for i in picks]
    scim_json = {**auth, "Content-Type": "application/scim+json"}
    patch = {
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": [{"op": "replace", "path": "displayName", "value": "Bench {n}"}],
    }
    post = {
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
        "userName": f"new.w{workers}.{{n}}@corp.example",
        "externalId": f"new-w{workers}-{{n}}",
        "name": {"givenName": "New", "familyName": "User {n}"},
        "emails": [{"value": f"new.w{workers}.{{n}}@corp.example", "type": "work", "primary": True}],
    }
    # Request n adds user n % 999 to group n % 50 (999 and 50 have no common factor: no pair repeats
    # in 49,950 requests, so every PATCH adds someone new, as an IdP's do).
    member_bodies = [
        json.dumps(
            {
                "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                "Operations": [{"op": "add", "path": "members", "value": [{"value": user_id}]}],
            }
        )
        for user_id in ids[:MEMBER_USERS]
    ]
    run_load(filters[0], headers=auth, seconds=2, concurrency=concurrency, urls=filters)  # warm up
    root = base.removesuffix("/scim/v2")
    results = {
        "healthz": run_load(f"{root}/healthz", seconds=seconds, concurrency=concurrency),
        "get": run_load(filters[0], headers=auth, seconds=seconds, concurrency=concurrency, urls=filters),
        "generic": run_load(generic[0], headers=auth, seconds=seconds, concurrency=concurrency, urls=generic),
        "get25": run_load(filters[0], headers=auth, seconds=seconds, concurrency=8, rate=25, urls=filters),
        "patch": run_load(
            f"{base}/Users/{ids[0]}",
            method="PATCH",
            headers=scim_json,
            seconds=seconds,
            concurrency=concurrency,
            urls=[f"{base}/Users/{i}" for i in ids],
            bodies=[json.dumps(patch)],
        ),
        "member": run_load(
            f"{base}/Groups/{groups[0]}",
            method="PATCH",
            headers=scim_json,
            seconds=seconds,
            concurrency=concurrency,
            urls=[f"{base}/Groups/{g}" for g in groups],
            bodies=member_bodies,
        ),
        "post": run_load(
            f"{base}/Users",
            method="POST",
            headers=scim_json,
            seconds=seconds,
            concurrency=concurrency,
            bodies=[json.dumps(post)],
        ),
    }
    for name, result in results.items():
        print(f"  workers={workers} {name}: {result.row()} {result.statuses}", file=sys.stderr, flush=True)
    return results


ROWS = (
    ("healthz", "`GET /healthz` (no token, no store): the HTTP ceiling of the same server"),
    ("get", '`GET /Users?filter=userName eq "..."`, as fast as answered'),
    ("generic", "the same GET, filter in parentheses: the generic search, not the short path"),
    ("get25", "the same GET at 25 requests/s"),
    ("patch", "`PATCH /Users/{id}` (a new displayName each time)"),
    ("member", "`PATCH /Groups/{id}` adding a member (a new one each time, 50 groups)"),
    ("post", "`POST /Users` (a new user each time)"),
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=10000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workers", default="1,2", help="comma-separated `sup serve --workers` counts")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]

    postgres = PostgresServer()
    postgres.start()
    workdir = Path(tempfile.mkdtemp(prefix="sup-scim-bench-"))
    results: dict[int, dict[str, LoadResult]] = {}
    try:
        url = postgres.create_database("scim_bench")
        migrate.upgrade(url)
        started = time.perf_counter()
        fill(url, args.users)
        fill_seconds = time.perf_counter() - started
        ids = _ids(args.users).get("ids", {})
        env = sup_env(
            SUP_DATABASE_URL=url,
            **{
                f"SUP_IDS__{kind.upper()}__{end.upper()}": str(value)
                for kind, bounds in ids.items()
                for end, value in bounds.items()
            },
            SUP_SCIM__RATE_LIMIT__REQUESTS_PER_SECOND="100000",
            SUP_SCIM__RATE_LIMIT__BURST="100000",
        )
        token = run_sup("token", "create", "--name", CONNECTION, "--role", "scim", env=env).stdout.strip()
        for workers in counts:
            extra = ["--workers", str(workers)] if workers > 1 else []  # 1: also what older SUPs run
            server = SupServer(env, workdir / f"serve{workers}.log", args=extra)
            try:
                results[workers] = measure(
                    f"{server.url}/scim/v2", token, args.users, workers, args.seconds, args.concurrency
                )
            finally:
                server.stop()
    finally:
        postgres.stop()
    print(f"\n{args.users} users in PostgreSQL (filled through SCIM's storage in {fill_seconds:.1f} s),")
    print(f"{args.seconds:.0f} s per measurement, {args.concurrency} connections (8 at 25 requests/s)\n")
    print("| measurement | " + " | ".join(f"`--workers {n}`" for n in counts) + " |")
    print("|---|" + "---:|" * len(counts))
    for key, label in ROWS:
        print(f"| {label} | " + " | ".join(results[n][key].row() for n in counts) + " |")


if __name__ == "__main__":
    main()
