"""Kubernetes target benchmark: a first pass that creates every user's objects, then a no-change pass.

    .venv/bin/python bench/kube_bench.py [--users 1000] [--workers 8] [--sequential]
        [--keys 2] [--groups-per-user 5] [--group-size 250] [--compare] [--templates-dir DIR [--upgrade]]
        [--floor] [--memory] [--first-only]

Starts its own etcd + kube-apiserver (tests/support/kubeapi.py; etcd's data on tmpfs), fills a SQLite
store through SUP's services (each user with `keys` ed25519 keys and in `groups-per-user` shared
groups of `group-size` members), and in a fresh namespace (Pod Security `restricted` enforced) times:
1. SUP's first pass: open, observe (empty), diff, apply (5 objects per user, `workers` in flight);
2. SUP's no-change pass: observe + diff, counting requests and writes; and a whole `run_pass` (the
   store read included) as `sup reconcile --target kube` runs it (these list: kube.watch off);
   then the same with the watch cache (sup/targets/kube/watch.py) as `sup serve` runs passes: one
   pass that lists and seeds it, then a no-change pass and a `run_pass` served from it;
3. the login ConfigMaps (sup/targets/kube/login_files.py): rendering every user's files, their
   sizes (the data, and the whole object as the API server stores it), and what a change costs: a
   key change (a pass scoped to that user) and a shared group's new member (a full pass);
4. with --compare, steps 1 and 2 again into a second namespace without the login ConfigMaps (the
   target as it was before them: `_login_config` replaced by a no-op in this process), for the
   difference they make;
5. with --sequential, a first pass with workers=1 into another namespace, for the effect of
   concurrency.
`--templates-dir`: kube.templates_dir for every pass, e.g. a directory holding
tests/kube/fixtures/service-with-cluster-ip.yaml.j2 as service.yaml.j2 (login Services with a
ClusterIP allocated each, as before they were headless) for a before/after of the first pass; with
`--upgrade`, last, a pass with the shipped templates (every such Service deleted and created again
headless) and the no-change pass after it.
`--floor`: before SUP's first pass, the raw floor: the same objects (rendered by SUP into another
namespace beforehand, not timed) written by a plain HTTP client (httpx, server-side apply) with the
same number in flight, all at once (no phases), so SUP's first pass can be given as a ratio to it.
`--memory`: after the no-change passes, bench/kube_memory.py in a process of its own: what the watch
cache, the memo and the store snapshot hold. `--first-only`: stop after the first pass (and the
memory probe).
Prints Markdown tables and the load average before and after. Not a test: nothing here asserts a
time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sup.config import Settings
from sup.config.targets import target_context
from sup.domain.desired import DesiredState
from sup.groups.schemas import GroupCreate
from sup.groups.service import create_group
from sup.reconcile.planner import desired_state, run_pass
from sup.store import migrate, outbox
from sup.store.audit import Actor
from sup.store.session import make_engine, make_sessionmaker
from sup.targets.kube import SPEC, KubeTarget, watch
from sup.targets.kube import diff as kube_diff
from sup.targets.kube.client import RESOURCES
from sup.targets.kube.login_files import Directory
from sup.targets.kube.model import API_KIND, NewObject
from sup.users.schemas import UserCreate, UserPatch
from sup.users.service import create_user, update_user
from tests.support.keys import ed25519_key
from tests.support.kubeapi import KubeApiServer, collection

ACTOR = Actor(name="bench", role="admin")


class _Done(Exception):
    """--first-only: the rest of the steps are skipped."""


@contextmanager
def timed(results: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    results[name] = time.perf_counter() - start


def group_names(users: int, per_user: int, size: int) -> list[str]:
    count = max(per_user, -(-users * per_user // size))
    return [f"proj{g:04d}" for g in range(count)]


def fill_store(settings: Settings, users: int, keys: int = 0, per_user: int = 0, size: int = 250) -> None:
    """`users` users, each with `keys` SSH keys and in `per_user` of the shared groups (user i in
    groups i, i + stride, ... modulo their number: `size` members each)."""
    sessions = make_sessionmaker(make_engine(settings.database_url))
    groups = group_names(users, per_user, size) if per_user else []
    stride = len(groups) // per_user if per_user else 0
    with sessions.begin() as session:
        for name in groups:
            create_group(session, settings, ACTOR, GroupCreate(name=name))
        for i in range(users):
            username = f"user{i:05d}"
            create_user(
                session, settings, ACTOR,
                UserCreate(
                    username=username, display_name=f"User {i}",
                    ssh_public_keys=[ed25519_key(f"{username}@host{k}") for k in range(keys)],
                    groups=[groups[(i + k * stride) % len(groups)] for k in range(per_user)],
                ),
            )  # fmt: skip


def change_keys(sessions: Any, settings: Settings) -> None:
    with sessions.begin() as session:
        update_user(
            session, settings, ACTOR, "user00000", UserPatch(ssh_public_keys=[ed25519_key("user00000@new")])
        )


def join_group(sessions: Any, settings: Settings) -> None:
    """A new member for the first shared group: the group's change makes the pass a full one."""
    with sessions.begin() as session:
        create_user(session, settings, ACTOR, UserCreate(username="newcomer", groups=["proj0000"]))


def clear_outbox(sessions: Any) -> None:
    """Forget the marks of the store's filling (a shared group among them would make every pass full)."""
    with sessions.begin() as session:
        outbox.clear(session, outbox.pending(session))


def summary(result: Any) -> dict[str, Any]:
    (kube,) = [t for t in result.targets if t.target == "kube"]
    return {"scoped": kube.scoped, "changes": len(kube.changes), "failed": len(kube.failed)}


def login_files(
    server: KubeApiServer,
    settings: Settings,
    desired: DesiredState,
    results: dict[str, float],
    sizes: dict[str, str],
) -> None:
    """Render every active user's login files in process (what each pass does for users the memo
    does not know), and read their sizes: the data, and the ConfigMap as the API server holds it."""
    start = time.perf_counter()
    directory = Directory(desired)
    data = [directory.files([user]).size for user in desired.users.values() if user.active]
    results["render every user's login files (Directory + files)"] = time.perf_counter() - start
    assert settings.kube is not None
    with server.admin() as admin:
        stored = [
            len(json.dumps(item, separators=(",", ":")))
            for item in admin.items(
                collection(settings.kube.namespace, "configmaps"), "app.kubernetes.io/managed-by=sup"
            )
        ]
    sizes["login ConfigMaps"] = f"{len(stored):,}"
    sizes["data bytes per user, median (min-max)"] = (
        f"{statistics.median(data):,.0f} ({min(data):,}-{max(data):,})"
    )
    sizes["data bytes, all users"] = f"{sum(data):,}"
    sizes["ConfigMap as stored (JSON, with metadata and managedFields), median"] = (
        f"{statistics.median(stored):,.0f}"
    )
    sizes["ConfigMaps as stored, all"] = f"{sum(stored):,}"


def one_pass(settings: Settings, desired: DesiredState, *, apply: bool) -> dict[str, Any]:
    target = KubeTarget(target_context(SPEC, settings))
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


def floor_bodies(settings: Settings, desired: DesiredState) -> list[tuple[str, bytes]]:
    """(object path, JSON body) of every object SUP would create in settings' (empty) namespace:
    rendered by SUP, kept as bytes (250,000 dicts would crowd the machine)."""
    assert settings.kube is not None
    target = KubeTarget(target_context(SPEC, settings))
    try:
        changes = target.diff(desired, target.observe())
    finally:
        target.close()
    bodies = []
    for change in changes:
        if isinstance(change.details, NewObject) and change.kind in API_KIND:
            path = f"{RESOURCES[change.kind].collection(settings.kube.namespace)}/{change.name}"
            bodies.append((path, json.dumps(change.details.manifest, separators=(",", ":")).encode()))
    return bodies


def floor_pass(server: KubeApiServer, bodies: Sequence[tuple[str, bytes]], workers: int) -> dict[str, Any]:
    """The raw floor: each body server-side applied by a plain client, `workers` in flight."""
    headers = {"Content-Type": "application/apply-patch+yaml"}
    params = {"fieldManager": "floor", "force": "true"}
    with server.admin() as admin:

        def one(item: tuple[str, bytes]) -> bool:
            response = admin.http.patch(item[0], content=item[1], headers=headers, params=params)
            return response.status_code < 300

        with ThreadPoolExecutor(max_workers=workers) as pool:
            outcomes = list(pool.map(one, bodies))
    return {"objects": len(bodies), "failed": outcomes.count(False)}


def memory_probe(server: KubeApiServer, database_url: str, namespace: str) -> dict[str, Any]:
    """bench/kube_memory.py in a process of its own, without and with --trace; their JSON."""
    result: dict[str, Any] = {}
    for trace in ([], ["--trace"]):
        probe = subprocess.run(  # noqa: S603 - this interpreter, a script of the repository
            [
                sys.executable, str(Path(__file__).with_name("kube_memory.py")),
                "--database-url", database_url, "--kubeconfig", str(server.admin_kubeconfig),
                "--namespace", namespace, *trace,
            ],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        result.update(json.loads(probe.stdout))
    return result


def wide_ids(users: int) -> dict[str, Any]:
    """The default uid range holds 40,000 users: above that, ids as an operator would set them
    (uids from 10000 up, ordinary groups' gids far above them; scale_bench.py uses these too)."""
    if users <= 40_000:
        return {}
    return {
        "uid_range": {"min": 10_000, "max": 10_000 + 2 * users},
        "gid_range": {"min": 1_000_000, "max": 1_099_999},
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=8, help="kube.workers: writes in flight")
    parser.add_argument("--sequential", action="store_true", help="also a first pass with workers=1")
    parser.add_argument("--keys", type=int, default=2, help="SSH keys per user")
    parser.add_argument("--groups-per-user", type=int, default=5, help="shared groups each user is in")
    parser.add_argument("--group-size", type=int, default=250, help="members of each shared group")
    parser.add_argument("--compare", action="store_true", help="also passes without the login ConfigMaps")
    parser.add_argument("--templates-dir", help="kube.templates_dir for every pass (see the docstring)")
    parser.add_argument("--upgrade", action="store_true", help="last, a pass with the shipped templates")
    parser.add_argument("--floor", action="store_true", help="the raw floor before SUP's first pass")
    parser.add_argument("--memory", action="store_true", help="what the caches hold (kube_memory.py)")
    parser.add_argument("--first-only", action="store_true", help="stop after the first pass")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()

    server = KubeApiServer().start()
    work = Path(tempfile.mkdtemp(prefix="sup-kube-bench-"))
    results: dict[str, float] = {}
    counts: dict[str, Any] = {}
    sizes: dict[str, str] = {}
    sequential_rate = None
    try:
        database_url = f"sqlite:///{work / 'sup.db'}"
        migrate.upgrade(database_url)

        def settings_for(namespace: str, *, shipped: bool = False, **kube: Any) -> Settings:
            if args.templates_dir and not shipped:
                kube = {"templates_dir": args.templates_dir, **kube}
            return Settings(
                database_url=database_url,
                kube={"namespace": namespace, "kubeconfig": str(server.admin_kubeconfig), **kube},
                ids=wide_ids(args.users),
            )

        namespace = server.new_namespace("bench")
        settings = settings_for(namespace, workers=args.workers, watch=False)
        with timed(results, "fill the store (not compared)"):
            fill_store(settings, args.users, args.keys, args.groups_per_user, args.group_size)
        sessions = make_sessionmaker(make_engine(database_url))
        with timed(results, "derive the desired state from the store"):
            desired = desired_state(sessions, settings)

        floor_rate = None
        if args.floor:
            floor_settings = settings_for(server.new_namespace("bench-floor"), workers=args.workers)
            bodies = floor_bodies(floor_settings, desired)
            name = f"raw floor: the same objects, a plain client ({args.workers} in flight)"
            with timed(results, name):
                counts["raw floor"] = floor_pass(server, bodies, args.workers)
            floor_rate = len(bodies) / results[name]
            del bodies

        first_name = f"SUP first pass (observe + diff + apply, {args.workers} in flight)"
        with timed(results, first_name):
            first = one_pass(settings, desired, apply=True)
        counts["first pass"] = first
        objects = first["changes"]
        first_rate = objects / results[first_name]
        if floor_rate:
            counts["SUP first pass / raw floor (time)"] = round(floor_rate / first_rate, 2)
        if args.memory:
            counts["memory (kube_memory.py)"] = memory_probe(server, database_url, namespace)
        if args.first_only:
            raise _Done

        with timed(results, "SUP no-change pass (observe + diff)"):
            again = one_pass(settings, desired, apply=False)
        counts["no-change pass"] = again
        with timed(results, "SUP no-change `run_pass` (store read included)"):
            whole = run_pass(settings, sessions, only=["kube"], apply=True)
        if not whole.ok or whole.changes:
            raise SystemExit(f"the no-change run_pass was not clean: {[t.error for t in whole.targets]}")

        watched = settings_for(namespace, workers=args.workers, watch=True)
        watch.START_AFTER = 0  # as from the second pass of `sup serve`
        with timed(results, "no-change pass that lists and seeds the watch cache (observe + diff)"):
            counts["no-change pass, seeding the watch cache"] = one_pass(watched, desired, apply=False)
        with timed(results, "SUP no-change pass served from the watch cache (observe + diff)"):
            counts["no-change pass from the watch cache"] = one_pass(watched, desired, apply=False)
        with timed(results, "SUP no-change `run_pass` served from the watch cache (store read included)"):
            cached = run_pass(watched, sessions, only=["kube"], apply=True)
        if not cached.ok or cached.changes:
            raise SystemExit(f"the cached run_pass was not clean: {[t.error for t in cached.targets]}")
        watch.reset()

        login_files(server, settings, desired, results, sizes)
        clear_outbox(sessions)
        with timed(results, "a key change: scoped `run_pass` (store read included)"):
            change_keys(sessions, settings)
            keyed = run_pass(settings, sessions, apply=True, scoped=True)
        counts["key change"] = summary(keyed)
        with timed(results, "a shared group's new member: full `run_pass` (store read included)"):
            join_group(sessions, settings)
            joined = run_pass(settings, sessions, apply=True, scoped=True)
        counts["group change"] = summary(joined)

        if args.compare:
            before = settings_for(server.new_namespace("bench-before"), workers=args.workers)
            kube_diff._login_config = lambda *_, **__: []  # the target as it was before them
            name = f"first pass without login ConfigMaps ({args.workers} in flight)"
            with timed(results, name):
                counts[name] = one_pass(before, desired, apply=True)
            with timed(results, "no-change pass without login ConfigMaps (observe + diff)"):
                counts["no-change pass without login ConfigMaps"] = one_pass(before, desired, apply=False)

        if args.templates_dir and args.upgrade:
            upgraded = settings_for(namespace, shipped=True, workers=args.workers, watch=False)
            current = desired_state(sessions, upgraded)
            with timed(results, "upgrade: pass with the shipped templates (Services replaced)"):
                counts["upgrade pass"] = one_pass(upgraded, current, apply=True)
            with timed(results, "no-change pass after the upgrade (observe + diff)"):
                counts["no-change pass after the upgrade"] = one_pass(upgraded, current, apply=False)

        if args.sequential:
            other = settings_for(server.new_namespace("bench-seq"), workers=1)
            with timed(results, "SUP first pass, workers=1"):
                counts["sequential first pass"] = one_pass(other, desired, apply=True)
            sequential_rate = objects / results["SUP first pass, workers=1"]
    except _Done:
        pass
    finally:
        watch.reset()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    kinds = "PersistentVolumeClaim, NetworkPolicy, login ConfigMap, Service, StatefulSet each"
    print(f"\n{args.users} users, {objects} objects ({kinds})")
    templates = args.templates_dir or "the shipped ones"
    load_after = os.getloadavg()
    print(f"templates: {templates}; load average (1, 5, 15 min) before {load_before}, after {load_after}\n")
    print("| step | seconds | objects/s |\n|---|---:|---:|")
    for name, seconds in results.items():
        rate = ""
        if name.startswith("SUP first pass ("):
            rate = f"{first_rate:,.0f}"
        elif name.startswith("raw floor") and floor_rate:
            rate = f"{floor_rate:,.0f}"
        elif name == "SUP first pass, workers=1" and sequential_rate:
            rate = f"{sequential_rate:,.0f}"
        print(f"| {name} | {seconds:.2f} | {rate} |")
    print("\n| login ConfigMaps | value |\n|---|---:|")
    for name, value in sizes.items():
        print(f"| {name} | {value} |")
    print()
    for name, value in counts.items():
        print(f"- {name}: {value}")


if __name__ == "__main__":
    main()
