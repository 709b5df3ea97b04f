"""How much the check "no home inside or above another person's" costs at 50,000 people (issue 24).

    .venv/bin/python bench/homes_bench.py [--users 50000] [--checks 300] [--backend sqlite|postgresql|both]

For each backend (a SQLite file; a throwaway PostgreSQL server from tests/support/postgres.py), a
fresh migrated store is filled with --users people through the users service's batched create
(sup/users/bulk.py, chunks of 1,000 as `sup import` writes them: each chunk runs `check_new_homes`
against everything stored before it), then:

- one home checked as a create or PATCH checks it (`check_home`: the lock, one query), --checks
  times in a transaction each, a free home and a home inside another person's, median and p95;
- a batch of 1,000 new homes checked against the full store (`check_new_homes`), as an import chunk;
- the query plan of the one-home query (it must use ix_users_home_directory, not scan `users`).

Prints a Markdown table. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy import select  # noqa: E402
from sqlalchemy.orm import Session, sessionmaker  # noqa: E402

from sup.config import Settings  # noqa: E402
from sup.errors import Conflict  # noqa: E402
from sup.store import migrate  # noqa: E402
from sup.store.audit import Actor  # noqa: E402
from sup.store.models import User  # noqa: E402
from sup.store.session import make_engine, make_sessionmaker  # noqa: E402
from sup.users.bulk import create_users  # noqa: E402
from sup.users.homes import _near, check_home, check_new_homes  # noqa: E402
from sup.users.schemas import UserCreate  # noqa: E402

ACTOR = Actor(name="bench", role="admin")
CHUNK = 1000


def _settings(url: str, users: int) -> Settings:
    top = 100000 + 2 * users
    return Settings(
        database_url=url,
        ids={"uid_range": {"min": 100000, "max": top}, "gid_range": {"min": top + 1, "max": top + 1000}},
    )


def _fill(sessions: sessionmaker[Session], settings: Settings, users: int) -> float:
    started = time.perf_counter()
    for start in range(0, users, CHUNK):
        specs = [UserCreate(username=f"u{n:06d}") for n in range(start, min(start + CHUNK, users))]
        with sessions.begin() as session:
            create_users(session, settings, ACTOR, specs, "import")
    return time.perf_counter() - started


def _one(sessions: sessionmaker[Session], settings: Settings, home: str) -> tuple[float, bool]:
    with sessions.begin() as session:
        started = time.perf_counter()
        try:
            check_home(session, settings, home)
            refused = False
        except Conflict:
            refused = True
        took = time.perf_counter() - started
        session.rollback()
    return took, refused


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    return f"{statistics.median(ordered) * 1000:.2f} / {p95 * 1000:.2f}"


def _plan(sessions: sessionmaker[Session], dialect: str) -> str:
    query = select(User.username, User.home_directory).where(_near(["/home/u000042/x"]))
    with sessions() as session:
        bind = session.get_bind()
        compiled = query.compile(bind, compile_kwargs={"literal_binds": True})
        explain = "EXPLAIN QUERY PLAN " if dialect == "sqlite" else "EXPLAIN "
        rows = session.connection().exec_driver_sql(explain + str(compiled)).all()
    steps = [str(row[-1]).strip() for row in rows]
    return "; ".join(s.split("  (cost")[0] for s in steps if "SCAN" in s.upper() or "SEARCH" in s)


def run(url: str, dialect: str, users: int, checks: int) -> list[str]:
    migrate.upgrade(url)
    settings = _settings(url, users)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    try:
        fill = _fill(sessions, settings, users)
        free = [_one(sessions, settings, f"/home/new{n:06d}") for n in range(checks)]
        nested = [_one(sessions, settings, f"/home/u{n * 7 % users:06d}/x") for n in range(checks)]
        assert not any(r for _, r in free)
        assert all(r for _, r in nested)
        batch = {f"n{n:06d}": f"/home/n{n:06d}" for n in range(CHUNK)}
        with sessions.begin() as session:
            started = time.perf_counter()
            check_new_homes(session, settings, batch)
            batch_s = time.perf_counter() - started
            session.rollback()
        plan = _plan(sessions, dialect)
    finally:
        engine.dispose()
    free_ms, nested_ms = _ms([t for t, _ in free]), _ms([t for t, _ in nested])
    return [
        f"| {dialect} | fill {users:,} people, chunks of {CHUNK:,} (each chunk checked) | {fill:.1f} s |",
        f"| {dialect} | `check_home`, a free home (median / p95 of {checks}) | {free_ms} ms |",
        f"| {dialect} | `check_home`, a home inside another's (median / p95) | {nested_ms} ms |",
        f"| {dialect} | `check_new_homes`, {CHUNK:,} new homes against them | {batch_s * 1000:.0f} ms |",
        f"| {dialect} | plan of the one-home query | {plan} |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=50000)
    parser.add_argument("--checks", type=int, default=300)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    args = parser.parse_args()
    rows: list[str] = []
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as work:
        if args.backend in ("sqlite", "both"):
            rows += run(f"sqlite:///{Path(work) / 'sup.db'}", "sqlite", args.users, args.checks)
        if args.backend in ("postgresql", "both"):
            from tests.support.postgres import PostgresServer

            server = PostgresServer()
            server.start()
            try:
                rows += run(server.create_database("bench"), "postgresql", args.users, args.checks)
            finally:
                server.stop()
    end_load = os.getloadavg()
    print(
        f"{platform.machine()}, {os.cpu_count()} cores; load average {load[0]:.1f} at start, "
        f"{end_load[0]:.1f} at end"
    )
    print("| backend | what | time |\n|---|---|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
