"""Benchmark of the Slurm target against a real munge + MariaDB + slurmdbd (started here, in a temp
dir, with the test suite's support code).

    .venv/bin/python bench/slurm_bench.py [--users 10000] [--accounts 50] [--sample 200]

Measures, in one run:
1. chunk size: new users added to one account on a fresh cluster, N names per sacctmgr call;
2. the naive baseline: one `sacctmgr -i add user` per user (what most sync tools do), timed on a
   sample of --sample users on a cluster of its own, plus one `add account` per account, then scaled
   linearly to --users (the per-call cost does not depend on how many users exist);
3. SUP's first pass (`run_pass(apply=True)`: store -> desired state -> observe -> diff -> apply) for
   --users users in --accounts accounts;
4. SUP's no-change pass right after it (must make zero writes);
5. the pass after a write (push to login): one new member of a bound group, `run_pass(scoped=True)`
   as the reconciler runs it after writes (store read included), its sacctmgr reads against the
   no-change full pass's.
`--no-baselines` skips 1 and 2. Prints a Markdown report (for BENCHMARKS.md) at the end.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sup.config import Settings  # noqa: E402
from sup.domain.status import PassState  # noqa: E402
from sup.groups.schemas import GroupCreate  # noqa: E402
from sup.groups.service import create_group  # noqa: E402
from sup.reconcile.planner import run_pass  # noqa: E402
from sup.slurm_accounts.schemas import SlurmAccountCreate  # noqa: E402
from sup.slurm_accounts.service import create_account  # noqa: E402
from sup.store import migrate, outbox  # noqa: E402
from sup.store.audit import Actor  # noqa: E402
from sup.store.session import make_engine, make_sessionmaker  # noqa: E402
from sup.targets.base import Target  # noqa: E402
from sup.targets.slurm import SlurmTarget  # noqa: E402
from sup.targets.spec import TargetContext  # noqa: E402
from sup.users.schemas import UserCreate  # noqa: E402
from sup.users.service import create_user  # noqa: E402
from tests.support.slurmdbd import SlurmdbdServer  # noqa: E402

ACTOR = Actor(name="bench", role="admin")


def sacctmgr(server: SlurmdbdServer, *args: str) -> float:
    started = time.perf_counter()
    result = server.sacctmgr_result(*args)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"sacctmgr {' '.join(args[:3])} failed: {result.stdout}{result.stderr}")
    return elapsed


def measure_chunks(server: SlurmdbdServer, sizes: list[int], total: int) -> list[tuple[int, float, int]]:
    """(chunk size, seconds for `total` new users, calls)."""
    results = []
    for size in sizes:
        cluster = f"chunk{size}"
        server.sacctmgr("add", "cluster", cluster)
        server.sacctmgr("add", "account", f"acct{size}", f"cluster={cluster}")
        names = [f"c{size}u{i}" for i in range(total)]
        started = time.perf_counter()
        calls = 0
        for start in range(0, total, size):
            batch = ",".join(names[start : start + size])
            server.sacctmgr("add", "user", batch, f"account=acct{size}", f"cluster={cluster}")
            calls += 1
        results.append((size, time.perf_counter() - started, calls))
        print(f"  chunk {size:>5}: {total} users in {results[-1][1]:6.1f} s, {calls} calls", flush=True)
    return results


def measure_naive(server: SlurmdbdServer, sample: int, accounts: int) -> tuple[float, float]:
    """Seconds per user call and per account call, one sacctmgr call each."""
    cluster = "naive"
    server.sacctmgr("add", "cluster", cluster)
    account_seconds = [
        sacctmgr(server, "add", "account", f"naive{a}", f"cluster={cluster}", "fairshare=10")
        for a in range(accounts)
    ]
    user_seconds = [
        sacctmgr(
            server,
            "add",
            "user",
            f"n{i}",
            f"account=naive{i % accounts}",
            f"defaultaccount=naive{i % accounts}",
            f"cluster={cluster}",
        )
        for i in range(sample)
    ]
    return sum(user_seconds) / sample, sum(account_seconds) / accounts


def fill_store(url: str, users: int, accounts: int) -> None:
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    settings = Settings(database_url=url)
    per_account = users // accounts
    with sessions.begin() as session:
        for i in range(users):
            create_user(session, settings, ACTOR, UserCreate(username=f"user{i:05d}"))
        for a in range(accounts):
            members = [f"user{i:05d}" for i in range(a * per_account, (a + 1) * per_account)]
            create_group(session, settings, ACTOR, GroupCreate(name=f"proj{a:02d}", members=members))
            spec = SlurmAccountCreate(
                name=f"proj{a:02d}",
                group=f"proj{a:02d}",
                description=f"Project {a}",
                fairshare=10,
                limits={"max_jobs": 100, "grp_tres": {"cpu": "512"}},
            )
            create_account(session, ACTOR, spec)
    engine.dispose()


class Opener:
    def __init__(self) -> None:
        self.target: SlurmTarget | None = None

    def __call__(self, name: str, context: TargetContext[Any]) -> Target[Any, Any]:
        self.target = SlurmTarget(context)
        return self.target


def sup_pass(settings: Settings, url: str, *, scoped: bool = False) -> tuple[float, int, int, int, int]:
    """(seconds, changes, failed, sacctmgr writes, sacctmgr reads) of one reconcile pass; `scoped`:
    the reconciler's pass after writes (every target selected, so it reads the outbox)."""
    engine = make_engine(url)
    opener = Opener()
    only = None if scoped else ["slurm"]
    started = time.perf_counter()
    result = run_pass(
        settings, make_sessionmaker(engine), only=only, apply=True, opener=opener, scoped=scoped
    )
    elapsed = time.perf_counter() - started
    engine.dispose()
    (target,) = [t for t in result.targets if t.target == "slurm"]
    if target.state not in (PassState.APPLIED, PassState.PLANNED) or target.scoped != scoped:
        raise RuntimeError(f"the pass failed: {target.state} {target.error} {target.failed[:3]}")
    assert opener.target is not None
    sacctmgr = opener.target.sacctmgr
    return elapsed, len(target.changes), len(target.failed), sacctmgr.writes, sacctmgr.reads


def push_one_user(url: str, name: str, group: str) -> None:
    """An empty outbox, then one new user in a bound group: what a SCIM/API POST leaves behind."""
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:
        outbox.clear(session, outbox.pending(session))
    with sessions.begin() as session:
        create_user(session, Settings(database_url=url), ACTOR, UserCreate(username=name, groups=[group]))
    engine.dispose()


def remark(url: str, name: str) -> None:
    """Name the user in the outbox again: a scoped pass with nothing to do (its reads alone)."""
    engine = make_engine(url)
    with make_sessionmaker(engine).begin() as session:
        outbox.mark_dirty(session, "user", name)
    engine.dispose()


def started_server() -> SlurmdbdServer:
    """A fresh munge + MariaDB + slurmdbd: each measurement starts from an empty accounting database
    (the cost of some calls grows with what the database holds)."""
    server = SlurmdbdServer(cluster="bench")
    server.start()
    os.environ["SLURM_CONF"] = str(server.slurm_conf)
    return server


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--accounts", type=int, default=50)
    parser.add_argument("--sample", type=int, default=200, help="naive calls actually timed")
    parser.add_argument("--chunk-total", type=int, default=4000, help="users added per chunk-size run")
    parser.add_argument("--chunks", default="100,250,500,1000,2000,4000")
    parser.add_argument("--no-baselines", action="store_true", help="skip the chunk-size and naive runs")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sup-bench-"))
    try:
        chunk_results: list[tuple[int, float, int]] = []
        per_user = per_account = naive_total = 0.0
        server = started_server()
        try:
            version = server.sacctmgr_result("--version").stdout.strip()
            print(f"{version}; {os.cpu_count()} cores", flush=True)
            if not args.no_baselines:
                print("chunk size (new users into one account):", flush=True)
                sizes = [int(s) for s in args.chunks.split(",")]
                chunk_results = measure_chunks(server, sizes, args.chunk_total)
        finally:
            server.stop()

        if not args.no_baselines:
            server = started_server()
            try:
                print(f"naive baseline: timing {args.sample} one-user calls ...", flush=True)
                per_user, per_account = measure_naive(server, args.sample, args.accounts)
            finally:
                server.stop()
            naive_total = per_user * args.users + per_account * args.accounts
            print(f"  {per_user:.3f} s per user call, {per_account:.3f} s per account call", flush=True)

        url = f"sqlite:///{work / 'sup.db'}"
        migrate.upgrade(url)
        started = time.perf_counter()
        fill_store(url, args.users, args.accounts)
        print(f"store filled in {time.perf_counter() - started:.1f} s", flush=True)
        server = started_server()
        try:
            slurm = {"cluster": "bench", "sacctmgr": server.bin["sacctmgr"], "lock_dir": str(work)}
            settings = Settings(database_url=url, slurm=slurm)
            chunk_size = settings.slurm.chunk_size if settings.slurm else 0
            first = sup_pass(settings, url)
            print(
                f"SUP first pass: {first[0]:.1f} s, {first[1]} changes, {first[2]} failed, {first[3]} writes"
            )
            again = sup_pass(settings, url)
            print(f"SUP no-change pass: {again[0]:.2f} s, {again[1]} changes, {again[3]} writes", flush=True)
            push_one_user(url, "newcomer", "proj00")
            pushed = sup_pass(settings, url, scoped=True)
            print(f"SUP scoped pass, one new user: {pushed[0]:.2f} s, {pushed[1]} changes", flush=True)
            remark(url, "newcomer")
            settled = sup_pass(settings, url, scoped=True)
            rows = server.show("association", "where", "cluster=bench", "format=User")
            stored = sum(1 for (user,) in rows if user and user != "root")
        finally:
            server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    command = (
        f"`.venv/bin/python bench/slurm_bench.py --users {args.users} --accounts {args.accounts} "
        f"--sample {args.sample} --chunk-total {args.chunk_total} --chunks {args.chunks}"
        f"{' --no-baselines' if args.no_baselines else ''}`"
    )
    naive = (
        f"{per_user:.3f} s/user -> **{naive_total:.0f} s** (incl. {args.accounts} accounts at "
        f"{per_account:.3f} s each)"
    )
    print()
    print(
        f"### Results ({time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, {version})"
    )
    print()
    print(f"Command: {command}")
    print()
    print("| measurement | result |")
    print("|---|---|")
    sampled = f"timed on {args.sample}, scaled to {args.users}"
    if not args.no_baselines:
        print(f"| naive: one `sacctmgr add user` per user ({sampled}) | {naive} |")
    print(
        f"| SUP first pass, {args.users} users in {args.accounts} accounts (chunk_size {chunk_size}) "
        f"| **{first[0]:.1f} s**, {first[3]} sacctmgr writes, {first[1]} changes, {first[2]} failed |"
    )
    if not args.no_baselines:
        print(f"| speed-up | **{naive_total / first[0]:.0f}x** |")
    print(
        f"| SUP no-change pass | **{again[0]:.2f} s**, {again[3]} writes, {again[1]} changes, "
        f"{again[4]} sacctmgr reads |"
    )
    print(
        f"| SUP scoped pass for one new user (`run_pass(scoped=True)`, store read included) "
        f"| **{pushed[0]:.2f} s**, {pushed[3]} writes, {pushed[1]} changes, {pushed[4]} sacctmgr reads |"
    )
    print(
        f"| the same scoped pass again (nothing to do: its reads alone) "
        f"| **{settled[0]:.2f} s**, {settled[3]} writes, {settled[1]} changes, {settled[4]} sacctmgr reads |"
    )
    print(f"| associations stored | {stored} |")
    if args.no_baselines:
        return
    print()
    print(f"Chunk size: {args.chunk_total} new users added to one account, N names per call:")
    print()
    print("| names per call | calls | seconds | ms per user |")
    print("|---|---|---|---|")
    for size, seconds, calls in chunk_results:
        print(f"| {size} | {calls} | {seconds:.1f} | {1000 * seconds / args.chunk_total:.2f} |")


if __name__ == "__main__":
    main()
