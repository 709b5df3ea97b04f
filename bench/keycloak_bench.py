"""Keycloak source benchmark: a full pull of N users and G groups into an empty store, then a pull
with no change (which must write nothing), against a real Keycloak.

    .venv/bin/python bench/keycloak_bench.py [--users 5000] [--groups 200] [--memberships 2]

Starts its own Keycloak (tests/support/keycloak.py), makes a realm and fills it through the
partial-import admin endpoint (one request per 500 users: creating users one by one costs ~20 ms
each), then, on a SQLite store migrated to head:
1. SUP's read alone, one request at a time and keycloak.read_concurrency at a time (users paged,
   the group tree, each group's members), then the full pull: read + apply (new users through the
   batched create, groups and member lists through the groups service, one transaction); SQL writes
   counted; each step's CPU time in this process beside its wall time (the rest is Keycloak);
2. SUP's pull without change: read + compare; SQL INSERT/UPDATE/DELETE statements counted;
3. the naive membership read for comparison: each user's groups (GET users/{id}/groups, one request
   per user, as python-keycloak's get_user_groups does) instead of each group's members.
Prints a Markdown table. Not a test: nothing here asserts a time.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import event

from sup.config import Settings
from sup.sources.keycloak.reader import RealmReader
from sup.sources.keycloak.runner import full_sync
from sup.store import migrate
from sup.store.session import make_engine, make_sessionmaker
from tests.support.keycloak import KeycloakServer
from tests.support.keys import ed25519_key


def fill(server: KeycloakServer, realm: Any, users: int, groups: int, memberships: int) -> float:
    parents = max(1, groups // 10)
    paths: list[str] = []
    tree: list[dict[str, Any]] = []
    for p in range(parents):
        children = [{"name": f"team{p:03d}-{c}"} for c in range(groups // parents - 1)]
        tree.append({"name": f"dept{p:03d}", "subGroups": children})
        paths.append(f"/dept{p:03d}")
        paths += [f"/dept{p:03d}/{c['name']}" for c in children]
    rng = random.Random(7)  # noqa: S311 - test data
    people = [
        {
            "username": f"user{i:05d}",
            "email": f"user{i:05d}@example.test",
            "firstName": "User",
            "lastName": f"N{i}",
            "enabled": True,
            "attributes": {"sshPublicKey": [ed25519_key(f"user{i}")]},
            "groups": rng.sample(paths, memberships),
        }
        for i in range(users)
    ]
    start = time.perf_counter()
    for parent in tree:  # 200 groups: the admin API one by one is quick enough
        parent_id = realm.add_group(parent["name"])
        for child in parent["subGroups"]:
            realm.add_group(child["name"], parent=parent_id)
    for first in range(0, users, 500):
        body = {"ifResourceExists": "SKIP", "users": people[first : first + 500]}
        realm.admin.connection.raw_post(
            f"admin/realms/{realm.name}/partialImport", data=json.dumps(body)
        ).raise_for_status()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=5000)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--memberships", type=int, default=2)
    args = parser.parse_args()

    server = KeycloakServer()
    t0 = time.perf_counter()
    server.start()
    started = time.perf_counter() - t0
    try:
        realm = server.new_realm(admin_events=False)
        filled = fill(server, realm, args.users, args.groups, args.memberships)
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/sup.db"
            migrate.upgrade(url)
            settings = Settings(database_url=url, keycloak=realm.settings())
            engine = make_engine(url)
            sessions = make_sessionmaker(engine)
            writes = [0]

            def count(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
                if statement.lstrip().split(" ", 1)[0].upper() in {"INSERT", "UPDATE", "DELETE"}:
                    writes[0] += 1

            event.listen(engine, "before_cursor_execute", count)
            assert settings.keycloak is not None

            def timed(step: Any) -> tuple[Any, float, float]:
                """The step's result, wall seconds and this process's CPU seconds (SUP's side: the
                rest of the wall time is Keycloak's answer, or the machine's other work)."""
                wall, cpu = time.perf_counter(), time.process_time()
                result = step()
                return result, time.perf_counter() - wall, time.process_time() - cpu

            cold = RealmReader(settings.keycloak)  # Keycloak's first answers after the fill: its JIT
            _, cold_time, cold_cpu = timed(cold.snapshot)  # and caches warm up; not SUP's cost
            one_at_a_time = RealmReader(settings.keycloak.model_copy(update={"read_concurrency": 1}))
            _, serial_time, serial_cpu = timed(one_at_a_time.snapshot)
            reader = RealmReader(settings.keycloak)
            _, read_only, read_cpu = timed(reader.snapshot)
            read_requests = reader.requests

            first, first_time, first_cpu = timed(lambda: full_sync(settings, engine, sessions))
            first_writes = writes[0]
            assert first.ok, first.as_json()

            writes[0] = 0
            again, again_time, again_cpu = timed(lambda: full_sync(settings, engine, sessions))
            again_writes = writes[0]

            naive = RealmReader(settings.keycloak)
            t = time.perf_counter()
            for user_id in naive.users():
                naive.user_groups(user_id)
            naive_time = time.perf_counter() - t

        concurrency = settings.keycloak.read_concurrency
        print(f"Keycloak 26.4.7 started in {started:.1f} s; realm filled by partial import in {filled:.1f} s")
        print(f"{args.users} users, {args.groups} groups, {args.memberships} memberships per user\n")
        print("| step | seconds | SUP CPU s | requests | SQL writes | result |")
        print("|---|---:|---:|---:|---:|---|")
        print(f"| first read after the fill (Keycloak cold) | {cold_time:.1f} | {cold_cpu:.1f} | "
              f"{cold.requests} | - | not compared: Keycloak warming up |")  # fmt: skip
        print(f"| read the realm, one request at a time | {serial_time:.1f} | {serial_cpu:.1f} | "
              f"{one_at_a_time.requests} | - | users paged, group tree, members per group |")  # fmt: skip
        print(f"| read the realm, {concurrency} requests in flight (SUP's read) | {read_only:.1f} | "
              f"{read_cpu:.1f} | {read_requests} | - | "
              f"{first.users_read} users, {first.groups_read} groups |")  # fmt: skip
        print(f"| naive read: users paged + each user's groups | {naive_time:.1f} | | {naive.requests} | - | "
              f"{naive_time / read_only:.1f}x SUP's read |")  # fmt: skip
        print(f"| first full pull (read + apply, new users batched) | {first_time:.1f} | {first_cpu:.1f} | "
              f"{first.requests} | "
              f"{first_writes} | {len(first.created)} users, {len(first.groups_created)} groups, "
              f"{first.members_added} memberships created |")  # fmt: skip
        print(f"| pull without change | {again_time:.1f} | {again_cpu:.1f} | {again.requests} | "
              f"{again_writes} | "
              f"{again.writes} objects written ({again_writes} SQL: source state) |")  # fmt: skip
    finally:
        server.stop()


if __name__ == "__main__":
    main()
