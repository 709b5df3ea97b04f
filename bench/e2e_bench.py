"""End-to-end benchmark: the whole system at cluster scale, on real servers, in one run.

    .venv/bin/python bench/e2e_bench.py [--users 10000] [--groups 100] [--samples 5]

Starts its own PostgreSQL (the store), slapd with an sssd reading it, munge + MariaDB + slurmdbd and
etcd + kube-apiserver (tests/support), fills the store through SUP's services with `--users` users
(one ed25519 key each) in `--groups` groups, each group bound to a Slurm account, then measures:
1. the first full pass into all three targets (`run_pass`, as `sup reconcile` runs it);
2. the no-change full pass right after: the store read and desired state, then each target's
   observe + diff, and the whole pass; the writes it made (must be zero);
3. with `sup serve` running on that store (reconciler on, default settings): the latency from
   `POST /api/v1/users` (a new member of a bound group) until the user resolves through sssd
   (`getent passwd`) AND has an association in `sacctmgr show associations` (`--samples` users,
   one after the other; sssd's negative cache is 1 s here, as in the tests);
4. push-to-login for SCIM: `POST /scim/v2/Users` until the user resolves through sssd.
Prints a Markdown table. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench.fullstack import TARGETS, FullStack, spread, timed, wait_until
from sup.config import Settings
from sup.groups.schemas import GroupCreate
from sup.groups.service import create_group
from sup.reconcile.planner import desired_state, run_pass
from sup.slurm_accounts.schemas import SlurmAccountCreate
from sup.slurm_accounts.service import create_account
from sup.store.audit import Actor
from sup.store.session import make_engine, make_sessionmaker
from sup.users.schemas import UserCreate
from sup.users.service import create_user
from tests.support.keys import ed25519_key

ACTOR = Actor(name="bench", role="admin")


def fill_store(settings: Settings, users: int, groups: int) -> None:
    """Users with one key each; user i in group i % groups; every group bound to a Slurm account."""
    sessions = make_sessionmaker(make_engine(settings.database_url))
    for start in range(0, users, 1000):
        with sessions.begin() as session:
            for i in range(start, min(users, start + 1000)):
                name = f"user{i:05d}"
                spec = UserCreate(
                    username=name,
                    display_name=f"User {i}",
                    email=f"{name}@example.org",
                    ssh_public_keys=[ed25519_key(name)],
                )
                create_user(session, settings, ACTOR, spec)
        print(f"  {min(users, start + 1000)} users", file=sys.stderr, flush=True)
    with sessions.begin() as session:
        for g in range(groups):
            members = [f"user{i:05d}" for i in range(g, users, groups)]
            create_group(session, settings, ACTOR, GroupCreate(name=f"lab{g:03d}", members=members))
            account = SlurmAccountCreate(name=f"lab{g:03d}", group=f"lab{g:03d}", fairshare=10)
            create_account(session, ACTOR, account)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sup-e2e-bench-"))
    stack = FullStack(work)
    rows: list[tuple[str, str]] = []
    try:
        stack.start()
        settings, url = stack.settings, stack.url

        seconds, _ = timed(lambda: fill_store(settings, args.users, args.groups))
        rows.append(
            (
                f"fill the store: {args.users} users, {args.groups} groups and accounts (not compared)",
                f"{seconds:.1f} s",
            )
        )
        sessions = make_sessionmaker(make_engine(url))

        seconds, first = timed(lambda: run_pass(settings, sessions, apply=True))
        per_target = ", ".join(
            f"{t.target} {t.state}: {len(t.applied)} applied, {len(t.failed)} failed{_error(t.error)}"
            for t in first.targets
        )
        rows.append(("first full pass, all targets", f"{seconds:.1f} s ({per_target})"))

        seconds, _ = timed(lambda: desired_state(sessions, settings))
        rows.append(("no-change: store read + desired state", f"{seconds:.2f} s"))
        for name in TARGETS:
            seconds, result = timed(lambda t=name: run_pass(settings, sessions, only=[t], apply=True))  # type: ignore[misc]
            rows.append(
                (
                    f"no-change: `run_pass` of {name} alone (store read included)",
                    f"{seconds:.2f} s, {len(result.changes)} changes",
                )
            )
        seconds, result = timed(lambda: run_pass(settings, sessions, apply=True))
        # A pass writes only to apply changes: zero changes is zero writes to every target.
        rows.append(
            ("**no-change full pass, all targets**", f"**{seconds:.2f} s**, {len(result.changes)} changes")
        )

        env = stack.env()
        token = stack.token(env, "bench", "admin")
        scim = stack.token(env, "bench-scim", "scim")
        server = stack.serve(env)
        try:
            api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
            scim_api = httpx.Client(
                base_url=server.url, headers={"Authorization": f"Bearer {scim}"}, timeout=30
            )
            wait_until(lambda: api.get("/readyz").json()["reconciler"].get("last_pass_at") is not None, 120)

            def provisioned(name: str) -> Callable[[], bool]:
                return lambda: stack.resolves(name) and stack.has_association(name)

            def resolves(name: str) -> Callable[[], bool]:
                return lambda: stack.resolves(name)

            api_times = []
            for i in range(args.samples):
                name = f"new{i:03d}"
                started = time.perf_counter()
                response = api.post("/api/v1/users", json={"username": name, "groups": ["lab000"]})
                response.raise_for_status()
                api_times.append(time.perf_counter() - started + wait_until(provisioned(name), 120))
            rows.append(("**API write → getent via sssd + sacctmgr association**", spread(api_times)))
            scim_times = []
            for i in range(args.samples):
                name = f"scim{i:03d}"
                started = time.perf_counter()
                created = scim_api.post(
                    "/scim/v2/Users",
                    json={"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": name},
                )
                created.raise_for_status()
                scim_times.append(time.perf_counter() - started + wait_until(resolves(name), 120))
            rows.append(("**SCIM POST /Users → getent via sssd**", spread(scim_times)))
        finally:
            server.stop()
    finally:
        stack.stop()
    print("| step | result |\n|---|---|")
    for step, value in rows:
        print(f"| {step} | {value} |")


def _error(error: str | None) -> str:
    return f" ({error})" if error else ""


if __name__ == "__main__":
    main()
