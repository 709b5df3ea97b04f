"""Kubernetes target benchmark: a first pass that creates every user's objects, then a no-change pass.

    .venv/bin/python bench/kube_bench.py [--users 1000] [--workers 8] [--sequential]

Starts its own etcd + kube-apiserver (tests/support/kubeapi.py; etcd's data on tmpfs), fills a SQLite
store through SUP's services, and in a fresh namespace (Pod Security `restricted` enforced) times:
1. SUP's first pass: open, observe (empty), diff, apply (4 objects per user, `workers` in flight);
2. SUP's no-change pass: observe + diff, counting requests and writes; and a whole `run_pass` (the
   store read included) as `sup reconcile --target kube` runs it;
3. with --sequential, a first pass with workers=1 into a second namespace, for the effect of
   concurrency.
Prints a Markdown table. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sup.config import Settings
from sup.domain.desired import DesiredState
from sup.reconcile.planner import desired_state, run_pass
from sup.reconcile.targets import target_context
from sup.store import migrate
from sup.store.audit import Actor
from sup.store.session import make_engine, make_sessionmaker
from sup.targets.kube import SPEC, KubeTarget
from sup.users.schemas import UserCreate
from sup.users.service import create_user
from tests.support.kubeapi import KubeApiServer

ACTOR = Actor(name="bench", role="admin")


@contextmanager
def timed(results: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    results[name] = time.perf_counter() - start


def fill_store(settings: Settings, users: int) -> None:
    sessions = make_sessionmaker(make_engine(settings.database_url))
    with sessions.begin() as session:
        for i in range(users):
            create_user(
                session, settings, ACTOR, UserCreate(username=f"user{i:05d}", display_name=f"User {i}")
            )


def one_pass(settings: Settings, desired: DesiredState, *, apply: bool) -> dict[str, Any]:
    target = KubeTarget(target_context(SPEC, settings, None))
    try:
        observed = target.observe()
        changes = target.diff(desired, observed)
        report = target.apply(changes) if apply and changes else None
        return {
            "changes": len(changes),
            "failed": len(report.failed) if report else 0,
            "requests": target.client.sent,
            "writes": target.client.writes,
            "warnings": len(target.client.warnings),
        }
    finally:
        target.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=8, help="kube.workers: writes in flight")
    parser.add_argument("--sequential", action="store_true", help="also a first pass with workers=1")
    args = parser.parse_args(argv)

    server = KubeApiServer().start()
    work = Path(tempfile.mkdtemp(prefix="sup-kube-bench-"))
    results: dict[str, float] = {}
    counts: dict[str, Any] = {}
    try:
        database_url = f"sqlite:///{work / 'sup.db'}"
        migrate.upgrade(database_url)

        def settings_for(namespace: str, **kube: Any) -> Settings:
            return Settings(
                database_url=database_url,
                kube={"namespace": namespace, "kubeconfig": str(server.admin_kubeconfig), **kube},
            )

        settings = settings_for(server.new_namespace("bench"), workers=args.workers)
        with timed(results, "fill the store (not compared)"):
            fill_store(settings, args.users)
        sessions = make_sessionmaker(make_engine(database_url))
        with timed(results, "derive the desired state from the store"):
            desired = desired_state(sessions, settings)

        with timed(results, f"SUP first pass (observe + diff + apply, {args.workers} in flight)"):
            first = one_pass(settings, desired, apply=True)
        counts["first pass"] = first
        objects = first["changes"]
        first_rate = objects / results[f"SUP first pass (observe + diff + apply, {args.workers} in flight)"]

        with timed(results, "SUP no-change pass (observe + diff)"):
            again = one_pass(settings, desired, apply=False)
        counts["no-change pass"] = again
        with timed(results, "SUP no-change `run_pass` (store read included)"):
            whole = run_pass(settings, sessions, only=["kube"], apply=True)
        if not whole.ok or whole.changes:
            raise SystemExit(f"the no-change run_pass was not clean: {[t.error for t in whole.targets]}")

        sequential_rate = None
        if args.sequential:
            other = settings_for(server.new_namespace("bench-seq"), workers=1)
            with timed(results, "SUP first pass, workers=1"):
                counts["sequential first pass"] = one_pass(other, desired, apply=True)
            sequential_rate = objects / results["SUP first pass, workers=1"]
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    kinds = "PersistentVolumeClaim, NetworkPolicy, Service, StatefulSet each"
    print(f"\n{args.users} users, {objects} objects ({kinds})\n")
    print("| step | seconds | objects/s |\n|---|---:|---:|")
    for name, seconds in results.items():
        rate = ""
        if name.startswith("SUP first pass ("):
            rate = f"{first_rate:,.0f}"
        elif name == "SUP first pass, workers=1" and sequential_rate:
            rate = f"{sequential_rate:,.0f}"
        print(f"| {name} | {seconds:.2f} | {rate} |")
    print()
    for name, value in counts.items():
        print(f"- {name}: {value}")


if __name__ == "__main__":
    main()
