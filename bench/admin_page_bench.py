"""The admin page at 50,000 users (issue 28): time to the first rendered user list and to a search's
results in a real headless chromium, and the API requests behind them.

    .venv/bin/python bench/admin_page_bench.py [--users 50000] [--runs 5] [--backend sqlite|postgresql]

A fresh store (a SQLite file, or a throwaway PostgreSQL server from tests/support/postgres.py) is
filled with --users people through the users service's batched create (sup/users/bulk.py, chunks of
1,000 as `sup import` writes them): each with a display name and an e-mail, one in 100 suspended,
each in one of 20 groups. Then a real `sup serve --no-reconciler` (one worker) and a chromium driven
through the DevTools protocol (tests/support/cdp.py):

- **first render**: from the navigation to /admin until the first page (50 rows) is in the table;
- **search**: a display-name substring typed and submitted, until its one result is shown;
- **filtered**: status "suspended" and a group, until the first page of them is shown;
- the API requests the page made for them (resource timing, in the browser), and the same requests
  from Python (httpx, one connection) for comparison;
- the query plans of the list's count and page queries with a search (a substring: no B-tree index
  serves it, the plans say so), and of a page without one.

Each figure is the median of --runs (a fresh page load each). Prints a Markdown table and the load
average before and after. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from sqlalchemy import func, select  # noqa: E402

from sup.config import Settings  # noqa: E402
from sup.groups.schemas import GroupCreate  # noqa: E402
from sup.groups.service import create_group  # noqa: E402
from sup.store import migrate  # noqa: E402
from sup.store.audit import Actor  # noqa: E402
from sup.store.models import User  # noqa: E402
from sup.store.session import make_engine, make_sessionmaker  # noqa: E402
from sup.users.bulk import create_users  # noqa: E402
from sup.users.schemas import UserCreate  # noqa: E402
from sup.users.service import UserFilter, _conditions  # noqa: E402
from tests.support.browser import find_chromium  # noqa: E402
from tests.support.cdp import Browser  # noqa: E402
from tests.support.cli import run_sup, sup_env  # noqa: E402
from tests.support.server import SupServer  # noqa: E402

ACTOR = Actor(name="bench", role="admin")
CHUNK = 1000
GROUPS = 20
PAGE = 50


def _settings(url: str, users: int) -> Settings:
    top = 100000 + 2 * users
    return Settings(
        database_url=url,
        ids={"uid_range": {"min": 100000, "max": top}, "gid_range": {"min": top + 1, "max": top + 1000}},
    )


def fill(url: str, users: int) -> float:
    migrate.upgrade(url)
    settings = _settings(url, users)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    started = time.perf_counter()
    with sessions.begin() as session:
        for g in range(GROUPS):
            create_group(session, settings, ACTOR, GroupCreate(name=f"lab{g:02d}"))
    for start in range(0, users, CHUNK):
        specs = [
            UserCreate(
                username=f"u{n:06d}",
                display_name=f"Person {n:06d} of lab {n % GROUPS:02d}",
                email=f"u{n:06d}@lab{n % GROUPS:02d}.example",
                active=n % 100 != 0,
                groups=[f"lab{n % GROUPS:02d}"],
            )
            for n in range(start, min(start + CHUNK, users))
        ]
        with sessions.begin() as session:
            create_users(session, settings, ACTOR, specs, "import")
    took = time.perf_counter() - started
    engine.dispose()
    return took


def plans(url: str) -> list[str]:
    """The query plans of the list's two queries with a search (what an index can and cannot do)."""
    engine = make_engine(url)
    explain = "EXPLAIN QUERY PLAN " if engine.dialect.name == "sqlite" else "EXPLAIN "
    conditions = _conditions(UserFilter(q="person 012345"))
    queries = {
        "count": select(func.count()).select_from(User).where(*conditions),
        "page": select(User.id).where(*conditions).order_by(User.username).limit(PAGE),
        "page, no search": select(User.id).order_by(User.username).limit(PAGE).offset(25_000),
    }
    found = []
    with engine.connect() as connection:
        for name, query in queries.items():
            compiled = query.compile(engine, compile_kwargs={"literal_binds": True})
            rows = connection.exec_driver_sql(explain + str(compiled)).all()
            steps = [str(row[-1]).split("  (cost")[0].strip() for row in rows]
            found.append(f"{name}: " + "; ".join(step for step in steps if step))
    engine.dispose()
    return found


def _median_ms(values: list[float]) -> str:
    return f"{statistics.median(values):.0f}"


def _api_times(browser: Browser, since: float) -> dict[str, float]:
    """Duration (ms) of each /api/v1 request the page started after `since` (performance.now())."""
    entries = browser.evaluate(
        "performance.getEntriesByType('resource').map((e) => [e.name, e.startTime, e.duration])"
    )
    times: dict[str, float] = {}
    for name, start, duration in entries:
        if "/api/v1/" in name and start >= since:
            path = httpx.URL(name).path
            times[path] = times.get(path, 0.0) + duration
    return times


def browse(server: SupServer, token: str, users: int, runs: int) -> dict[str, list[Any]]:
    results: dict[str, list[Any]] = {"first": [], "search": [], "filtered": [], "api": []}
    target = f"u{users // 2 + 1:06d}"
    needle = f"person {users // 2 + 1:06d}"
    with Browser(find_chromium(), timeout=60) as browser:
        for _ in range(runs):
            browser.navigate("about:blank")
            browser.evaluate("window.__cdpOldDocument = true")
            browser.send("Page.navigate", url=f"{server.url}/admin#token={token}")
            first = browser.wait_for(
                "window.__cdpOldDocument === undefined && "
                f"document.querySelectorAll('#users tbody tr').length === {PAGE} && performance.now()",
                timeout=120,
            )
            api_first = _api_times(browser, 0)
            browser.wait_for("document.querySelectorAll('#audit tbody tr').length > 0", timeout=60)

            browser.fill("#q", needle)
            start = browser.evaluate(
                "window.__t0 = performance.now(); "
                "document.querySelector('#search button[type=submit]').click(); window.__t0"
            )
            took = browser.wait_for(
                "document.querySelectorAll('#users tbody tr').length === 1 && "
                f"document.querySelector('#users tbody tr').cells[0].textContent === {json.dumps(target)} && "
                "performance.now() - window.__t0",
                timeout=120,
            )
            api_search = _api_times(browser, start)

            browser.fill("#q", "")
            browser.fill("#f-group", "lab00")
            start = browser.evaluate(
                "window.__t0 = performance.now(); document.getElementById('f-status').value = 'false'; "
                "document.getElementById('f-status').dispatchEvent(new Event('change')); window.__t0"
            )
            filtered = browser.wait_for(
                "document.getElementById('page-info').textContent.startsWith('1-') && "
                "document.querySelector('#users tbody tr').cells[4].textContent === 'suspended' && "
                "performance.now() - window.__t0",
                timeout=120,
            )
            results["first"].append(first)
            results["search"].append(took)
            results["filtered"].append(filtered)
            results["api"].append({"first": api_first, "search": api_search})
    return results


def direct(server: SupServer, token: str, users: int, runs: int) -> dict[str, list[float]]:
    """The same requests from Python: the server's share without the browser."""
    headers = {"Authorization": f"Bearer {token}"}
    page = [f"u{n:06d}" for n in range(PAGE)]
    requests: dict[str, tuple[str, Any]] = {
        "GET /users?limit=50": ("/api/v1/users", {"limit": PAGE}),
        "GET /users?limit=50&offset=25000": ("/api/v1/users", {"limit": PAGE, "offset": 25_000}),
        "GET /users?q=... (one match)": (
            "/api/v1/users",
            {"limit": PAGE, "q": f"person {users // 2 + 1:06d}"},
        ),
        "GET /users?q=... (1 in 20 match)": ("/api/v1/users", {"limit": PAGE, "q": "of lab 07"}),
        "GET /users?active=false&group=lab00": (
            "/api/v1/users",
            {"limit": PAGE, "active": "false", "group": "lab00"},
        ),
        "GET /status/users (50 names)": ("/api/v1/status/users", [("username", name) for name in page]),
    }
    found: dict[str, list[float]] = {name: [] for name in requests}
    with httpx.Client(base_url=server.url, headers=headers, timeout=120) as client:
        for _ in range(runs):
            for name, (path, params) in requests.items():
                started = time.perf_counter()
                client.get(path, params=httpx.QueryParams(params)).raise_for_status()
                found[name].append((time.perf_counter() - started) * 1000)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--users", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    args = parser.parse_args()
    load_before = Path("/proc/loadavg").read_text().strip()
    with tempfile.TemporaryDirectory(prefix="sup-admin-bench-") as tmp, ExitStack() as stack:
        if args.backend == "postgresql":
            from tests.support.postgres import PostgresServer

            postgres = PostgresServer()
            postgres.start()
            stack.callback(postgres.stop)
            url = postgres.create_database("admin_bench")
        else:
            url = f"sqlite:///{Path(tmp) / 'sup.db'}"
        fill_seconds = fill(url, args.users)
        print(f"filled {args.users} users in {fill_seconds:.1f} s", file=sys.stderr)
        env = sup_env(SUP_DATABASE_URL=url)
        token = run_sup("token", "create", "--name", "bench", "--role", "viewer", env=env).stdout.strip()
        server = SupServer(env, Path(tmp) / "serve.log", args=["--no-reconciler"])
        try:
            direct(server, token, args.users, 1)  # warm the server and the database's cache
            browsed = browse(server, token, args.users, args.runs)
            requests = direct(server, token, args.users, args.runs)
        finally:
            server.stop()
        query_plans = plans(url)
    load_after = Path("/proc/loadavg").read_text().strip()

    def api_median(kind: str, path: str) -> str:
        values = [run[kind].get(path) for run in browsed["api"]]
        return _median_ms([v for v in values if v is not None]) if any(values) else "-"

    print(f"\n{args.backend}, {args.users} users, {args.runs} runs each, median ms; cores: {os.cpu_count()}")
    print(f"load average before: {load_before}; after: {load_after}\n")
    print("| in chromium | ms | API requests behind it (ms, in the browser) |")
    print("|---|---|---|")
    print(
        f"| first render (navigation to 50 rows shown) | {_median_ms(browsed['first'])} | "
        f"/users {api_median('first', '/api/v1/users')}, "
        f"/status/users {api_median('first', '/api/v1/status/users')} |"
    )
    print(
        f"| search (submit to its one result shown) | {_median_ms(browsed['search'])} | "
        f"/users {api_median('search', '/api/v1/users')}, "
        f"/status/users {api_median('search', '/api/v1/status/users')} |"
    )
    print(f"| status + group filter (change to first page shown) | {_median_ms(browsed['filtered'])} | |")
    print("\n| from Python (httpx) | ms |")
    print("|---|---|")
    for name, values in requests.items():
        print(f"| {name} | {_median_ms(values)} |")
    print(f"\nQuery plans ({args.backend}):")
    for line in query_plans:
        print(f"- {line}")


if __name__ == "__main__":
    main()
