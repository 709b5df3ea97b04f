"""Scaling benchmark: how each cost grows with the size of the site (issue 17), one size per run.

    .venv/bin/python bench/scale_bench.py --users 1000 [--samples 10] [--only first,nochange,...]

Starts the whole system on real servers (bench/fullstack.py: PostgreSQL, slapd + sssd, munge + MariaDB
+ slurmdbd, etcd + kube-apiserver), then for `--users` N (one ed25519 key each; N/100 groups, each
bound to a Slurm account of the same name, every user in one of them) measures:

- fill: `sup import site.json` of a generated document (users, groups, slurm_accounts) as a
  subprocess: the bulk import path, batched store writes (sup/sources/files/apply.py). Not compared.
- first (part `first`): the first full pass into each target alone, one after the other
  (`run_pass(only=[target], apply=True)`, as `sup reconcile --target T`), timed, with the writes
  each applied. Without `first` the targets are filled by one pass of all targets together, timed.
- nochange: four no-change full passes, all three targets, by one `Reconciler` in this process
  (the scheduled pass of `sup serve`'s reconciler, same code: `Reconciler.tick`), so the later
  passes profit from what a long-running process keeps (the Kubernetes memo, a watch cache, the
  quiet pass each target remembers). Time, changes planned and writes applied (must be 0). This
  process sets the garbage collector's thresholds as the `sup` command does
  (sup/common/collector.py).
- push: `sup serve` on that store (default settings but the SCIM rate limit, raised for the load
  row; reconciler on). For `--samples` new users each, one after the other: from the start of
  `POST /api/v1/users` (a member of lab0000, with a key), and separately from the start of
  `POST /scim/v2/Users` (with a key in SUP's extension) followed by the IdP's `PATCH /Groups` adding
  them to a SCIM-created group bound to a Slurm account, until ALL of: `getent passwd` via sssd,
  `sss_ssh_authorizedkeys` shows the key, `sacctmgr show assoc where user=` lists the association.
  Median and p95 (interpolated), and the median time to each condition.
- load: SCIM `GET /Users?filter=userName eq "..."` (cycling through up to 1,000 existing users)
  against that `sup serve` with bench/loadgen.py's `run_load` (a compiled generator): requests/s
  at `--concurrency`, then p50/p99 at a fixed 25 requests/s.
- size (always, what exists): `sup serve`'s VmRSS and VmHWM (peak) after the passes and the load,
  the store's pg_database_size and row counts, and the objects in each target.

Prints `uptime` at start and end and a Markdown table. A failing step ends the run with the table
so far; `--keep-going` reports it in the table and goes on with the steps that do not need it.
Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from sqlalchemy import func, select, text

from bench import loadgen
from bench.fullstack import (
    CORE_GROUP,
    TARGETS,
    FullStack,
    LoginTimes,
    percentile,
    scim_push,
    timed,
    wait_until,
)
from bench.kube_bench import wide_ids
from sup.common import collector
from sup.reconcile.metrics import PASS_DURATION
from sup.reconcile.planner import run_pass
from sup.reconcile.worker import Reconciler
from sup.store.models import Group, OutboxMark, SshKey, User
from sup.store.session import make_engine
from sup.targets.kube.client import METADATA_LIST, RESOURCES
from sup.targets.kube.model import API_KIND
from sup.targets.kube.observe import OURS
from tests.support.cli import run_sup
from tests.support.keys import ed25519_key
from tests.support.server import SupServer
from tests.support.slapd import ROOT_DN, ROOT_PASSWORD

PARTS = ("first", "nochange", "push", "load")
SCIM_GROUP = "scimlab"  # created over SCIM: a SCIM connection may add members only to its own groups


def lab(g: int) -> str:
    return f"lab{g:04d}"


def user(i: int) -> str:
    return f"user{i:05d}"


class StepFailed(Exception):
    """A step failed and --keep-going is off: stop, print what there is."""


class Report:
    def __init__(self, keep_going: bool) -> None:
        self.keep_going = keep_going
        self.rows: list[tuple[str, str]] = []
        self.failed: list[str] = []

    def add(self, step: str, result: str) -> None:
        self.rows.append((step, result))
        print(f"  {step}: {result}", file=sys.stderr, flush=True)

    @contextmanager
    def step(self, label: str, fatal: bool = False) -> Iterator[None]:
        """Runs the block; a failure becomes a row, and ends the run if `fatal` or not --keep-going."""
        print(f"- {label}", file=sys.stderr, flush=True)
        try:
            yield
        except Exception as exc:
            traceback.print_exc()
            self.failed.append(label)
            self.add(f"{label}: **FAILED**", f"{type(exc).__name__}: {str(exc)[:300]}".replace("|", "/"))
            if fatal or not self.keep_going:
                raise StepFailed(label) from exc

    def print(self) -> None:
        print("| step | result |\n|---|---|")
        for step, value in self.rows:
            print(f"| {step} | {value} |")


# --- the site ------------------------------------------------------------------------------------


def write_site(path: Path, users: int, groups: int) -> None:
    """The import document: user i in lab(i % groups), one ed25519 key each, every lab a Slurm account."""
    document = {
        "groups": [{"name": lab(g), "description": f"Lab {g}"} for g in range(groups)],
        "slurm_accounts": [{"name": lab(g), "group": lab(g), "fairshare": 10} for g in range(groups)],
        "users": [
            {
                "username": user(i),
                "email": f"{user(i)}@example.org",
                "display_name": f"User {i}",
                "groups": [lab(i % groups)],
                "ssh_public_keys": [ed25519_key(user(i))],
            }
            for i in range(users)
        ],
    }
    path.write_text(json.dumps(document))


def fill(stack: FullStack, report: Report, users: int, groups: int) -> None:
    site = stack.work / "site.json"
    seconds, _ = timed(lambda: write_site(site, users, groups))
    print(f"  generated {site} in {seconds:.1f} s", file=sys.stderr)
    seconds, result = timed(lambda: run_sup("import", str(site), "--json", env=stack.env(), timeout=7200))
    if result.returncode != 0:
        raise RuntimeError(f"sup import exited {result.returncode}: {result.stderr[-2000:]}")
    report.add(
        f"fill: `sup import` of a generated JSON document ({users:,} users with a key, {groups:,} groups "
        f"and Slurm accounts; the batched import path; not compared)",
        f"{seconds:.1f} s",
    )


def widen_ids(stack: FullStack, needed: int) -> None:
    """The default uid range (10000-49999) holds 40,000 users; a bigger site sets `ids` as an
    operator would: uids from 10000 up, ordinary groups' gids far above them."""
    if needed <= 40_000:
        return
    stack.config["ids"] = wide_ids(needed)
    print(f"  ids: {stack.config['ids']} (the default uid range is too small)", file=sys.stderr)


def first_passes(stack: FullStack, report: Report, per_target: bool) -> None:
    sessions = stack.sessions()
    for only in [[t] for t in TARGETS] if per_target else [list(TARGETS)]:
        label = f"first full pass, {only[0]} alone" if per_target else "first full pass, all targets together"
        with report.step(label):
            seconds, result = timed(lambda o=only: run_pass(stack.settings, sessions, only=o, apply=True))  # type: ignore[misc]
            writes = ", ".join(
                f"{t.target} {t.state}: {len(t.applied):,} writes, {len(t.failed)} failed"
                + (f" ({t.error})" if t.error else "")
                for t in result.targets
                if t.target in only
            )
            report.add(label, f"{seconds:.1f} s ({writes})")


def target_seconds_so_far() -> dict[str, float]:
    """Seconds each target's passes took in this process so far (the planner's own histogram:
    observe, plan and apply of that target, which runs beside the others)."""
    found: dict[str, float] = {}
    for metric in PASS_DURATION.collect():
        for sample in metric.samples:
            if sample.name.endswith("_sum") and sample.labels.get("mode") == "reconcile":
                found[sample.labels["target"]] = sample.value
    return found


def target_seconds(targets: Sequence[Any], before: dict[str, float]) -> dict[str, float]:
    after = target_seconds_so_far()
    return {t.target: after.get(t.target, 0.0) - before.get(t.target, 0.0) for t in targets}


def no_change_passes(stack: FullStack, report: Report, passes: int = 4) -> None:
    engine = make_engine(stack.url)
    settings = stack.settings
    worker = Reconciler(settings, engine)
    clock = time.monotonic()
    try:
        for n in range(1, passes + 1):
            with report.step(f"no-change full pass {n}"):
                # Each tick is due for a scheduled (full) pass: the clock it is given has moved past
                # the interval since the last one.
                before = target_seconds_so_far()
                seconds, result = timed(lambda c=clock: worker.tick(c))  # type: ignore[misc]
                clock += settings.reconcile.interval_seconds + 1
                if result is None:
                    raise RuntimeError(
                        "the reconciler ran no pass (no lease, or the reconcile lock was held)"
                    )
                spent = target_seconds(result.targets, before)
                states = ", ".join(f"{t.target} {t.state} {spent[t.target]:.1f} s" for t in result.targets)
                applied = sum(len(t.applied) for t in result.targets)
                bold = "**" if n > 1 else ""
                report.add(
                    f"{bold}no-change full pass {n}, all targets{bold}"
                    + (" (the first after the writes)" if n == 1 else " (same process, warm)"),
                    f"{bold}{seconds:.2f} s{bold}, {len(result.changes)} changes, {applied} writes"
                    f" ({states})",
                )
    finally:
        worker.stop()
        engine.dispose()


# --- sup serve -----------------------------------------------------------------------------------


class Serve:
    """`sup serve` on the stack, with an admin and a SCIM client."""

    def __init__(self, stack: FullStack, log_level: str = "warning") -> None:
        self.stack = stack
        # Default settings, but the per-connection SCIM rate limit (50/s) would make the load row
        # measure the limiter; the push samples send a few requests each and never meet it.
        env = stack.env(
            SUP_SCIM__RATE_LIMIT__REQUESTS_PER_SECOND="100000", SUP_SCIM__RATE_LIMIT__BURST="100000"
        )
        admin = stack.token(env, "bench", "admin")
        self.scim_token = stack.token(env, "bench-scim", "scim")
        self.server: SupServer = stack.serve(env, log_level=log_level)
        self.api = httpx.Client(
            base_url=self.server.url, headers={"Authorization": f"Bearer {admin}"}, timeout=60
        )
        self.scim = httpx.Client(
            base_url=self.server.url,
            headers={"Authorization": f"Bearer {self.scim_token}", "Content-Type": "application/scim+json"},
            timeout=60,
        )
        self.sessions = stack.sessions()

    def stop(self) -> None:
        self.api.close()
        self.scim.close()
        self.server.stop()

    def settled(self, timeout: float = 3600) -> float:
        """Wait for the reconciler's first pass, then an empty outbox (everything written is applied)."""

        def ready() -> bool:
            reconciler = self.api.get("/readyz").json()["reconciler"]
            if reconciler.get("last_pass_at") is None:
                return False
            with self.sessions() as session:
                return not session.scalar(select(func.count()).select_from(OutboxMark))

        return wait_until(ready, timeout, "the reconciler's first pass and an empty outbox")

    def memory(self) -> dict[str, int]:
        """VmRSS and VmHWM (kB) of `sup serve` and any worker processes it started."""
        found = {"VmRSS": 0, "VmHWM": 0}
        for pid in [self.server.process.pid, *_children(self.server.process.pid)]:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                key, _, value = line.partition(":")
                if key in found:
                    found[key] += int(value.split()[0])
        return found


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *_children(int(child))]
    return found


def push_to_login(serve: Serve, report: Report, samples: int) -> None:
    stack = serve.stack
    with report.step("push to login, API"):
        times = LoginTimes()
        for i in range(samples):
            name, key = f"api{i:03d}", ed25519_key(f"api{i:03d}")
            started = time.perf_counter()
            response = serve.api.post(
                "/api/v1/users", json={"username": name, "groups": [lab(0)], "ssh_public_keys": [key]}
            )
            response.raise_for_status()
            times.wait(started, stack.login_checks(name, key))
        report.add(
            "**push to login: `POST /api/v1/users` → getent + SSH key + association**", _summary(times)
        )
    with report.step("push to login, SCIM"):
        group = serve.scim.post("/scim/v2/Groups", json={"schemas": [CORE_GROUP], "displayName": SCIM_GROUP})
        group.raise_for_status()
        group_id = group.json()["id"]
        serve.api.get(f"/api/v1/groups/{SCIM_GROUP}").raise_for_status()  # the POSIX name it derived
        serve.api.post(
            "/api/v1/slurm/accounts", json={"name": SCIM_GROUP, "group": SCIM_GROUP, "fairshare": 10}
        ).raise_for_status()
        serve.settled()
        times = LoginTimes()
        for i in range(samples):
            name, key = f"scim{i:03d}", ed25519_key(f"scim{i:03d}")
            started = time.perf_counter()
            scim_push(serve.scim, group_id, name, key)
            times.wait(started, stack.login_checks(name, key))
        report.add(
            "**push to login: `POST /scim/v2/Users` + `PATCH /Groups` (add member) → getent + SSH key + "
            "association**",
            _summary(times),
        )


def _summary(times: LoginTimes) -> str:
    each = ", ".join(f"{label} {statistics.median(values):.2f} s" for label, values in times.each.items())
    return (
        f"**median {statistics.median(times.total):.2f} s, p95 {percentile(times.total, 0.95):.2f} s** "
        f"(min {min(times.total):.2f}, max {max(times.total):.2f}; {len(times.total)} samples; "
        f"median to each: {each})"
    )


def scim_load(serve: Serve, report: Report, users: int, seconds: float, concurrency: int) -> None:
    with report.step("SCIM load generator"):
        loadgen.ensure_tool()
    if "SCIM load generator" in report.failed:
        return
    rng = random.Random(17)  # noqa: S311 - a reproducible sample, not a secret
    picked = rng.sample(range(users), min(users, 1000))
    base = f"{serve.server.url}/scim/v2/Users?filter="
    urls = [base + quote(f'userName eq "{user(i)}"') for i in picked]
    headers = {"Authorization": f"Bearer {serve.scim_token}"}
    with report.step("SCIM GET-by-filter, throughput"):
        result = loadgen.run_load(
            urls[0], headers=headers, seconds=seconds, concurrency=concurrency, urls=urls
        )
        report.add(
            "**SCIM `GET /Users?filter=userName eq` requests/s** "
            f"({concurrency} connections, {seconds:.0f} s)",
            f"**{result.rps:.0f}/s**, p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms, "
            f"{result.errors} errors, statuses {result.statuses}",
        )
    with report.step("SCIM GET-by-filter, latency at 25/s"):
        result = loadgen.run_load(
            urls[0], headers=headers, seconds=seconds, concurrency=4, rate=25, urls=urls
        )
        report.add(
            "SCIM `GET /Users?filter=userName eq` at 25 requests/s",
            f"p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms, {result.errors} errors",
        )


# --- sizes ---------------------------------------------------------------------------------------


def sizes(stack: FullStack, report: Report) -> None:
    with report.step("store size"):
        engine = make_engine(stack.url)
        with engine.connect() as connection:
            size = connection.scalar(text("SELECT pg_database_size(current_database())")) or 0
            counts = {
                name: connection.scalar(select(func.count()).select_from(model)) or 0
                for name, model in (("users", User), ("groups", Group), ("ssh keys", SshKey))
            }
        engine.dispose()
        rows = ", ".join(f"{n:,} {name}" for name, n in counts.items())
        report.add("store size (PostgreSQL `pg_database_size`)", f"{size / 2**20:.1f} MiB ({rows})")
    with report.step("objects in LDAP"):
        dns = _ldap_dns(stack)
        people = sum(",ou=people," in dn.lower() for dn in dns)
        groups = sum(",ou=groups," in dn.lower() for dn in dns)
        report.add("objects in LDAP", f"{len(dns):,} entries ({people:,} users, {groups:,} groups)")
    with report.step("objects in Slurm"):
        cluster = stack.slurmdbd.cluster
        accounts = stack.slurmdbd.show("account", "format=Account")
        associations = stack.slurmdbd.show("association", "where", f"cluster={cluster}", "format=User")
        report.add(
            "objects in Slurm",
            f"{sum(1 for (a,) in accounts if a != 'root'):,} accounts, "
            f"{sum(1 for (u,) in associations if u and u != 'root'):,} user associations",
        )
    with report.step("objects in Kubernetes"):
        found = _kube_counts(stack)
        report.add(
            "objects in Kubernetes (SUP's, by label)",
            f"{sum(found.values()):,} ({', '.join(f'{n:,} {kind}' for kind, n in found.items())})",
        )


def _ldap_dns(stack: FullStack) -> list[str]:
    result = subprocess.run(  # noqa: S603
        [  # noqa: S607 - ldapsearch from ldap-utils, on PATH
            "ldapsearch", "-x", "-LLL", "-H", stack.slapd.url, "-D", ROOT_DN, "-w", ROOT_PASSWORD,
            "-b", stack.base_dn, "-E", "pr=1000/noprompt", "(objectClass=*)", "1.1",
        ],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [line[4:] for line in result.stdout.splitlines() if line.startswith("dn: ")]


def _kube_counts(stack: FullStack) -> dict[str, int]:
    assert stack.kubeapi is not None
    found: dict[str, int] = {}
    with stack.kubeapi.admin() as admin:
        for kind, api_kind in API_KIND.items():
            path = RESOURCES[kind].collection(stack.namespace)
            found[api_kind], token = 0, ""
            while True:
                params = {"labelSelector": OURS, "limit": "1000", **({"continue": token} if token else {})}
                response = admin.http.get(path, params=params, headers={"Accept": METADATA_LIST})
                response.raise_for_status()
                body = response.json()
                found[api_kind] += len(body["items"])
                token = body["metadata"].get("continue") or ""
                if not token:
                    break
    return found


def memory(serve: Serve, report: Report) -> None:
    with report.step("sup serve memory"):
        kb = serve.memory()
        report.add(
            "`sup serve` resident memory after the passes and the load (VmRSS; peak VmHWM)",
            f"**{kb['VmRSS'] / 1024:.0f} MiB** (peak {kb['VmHWM'] / 1024:.0f} MiB)",
        )


# --- the run -------------------------------------------------------------------------------------


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()  # noqa: S607


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=None, help="default: users / 100 (at least 1)")
    parser.add_argument("--samples", type=int, default=10, help="push-to-login samples per source")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts of {','.join(PARTS)}")
    parser.add_argument("--keep-going", action="store_true", help="report a failing step and go on")
    parser.add_argument(
        "--serve-log-level",
        default="warning",
        help="`sup serve`'s log level; with debug, its serve.log says where each pass's time went "
        "(the work dir is then kept), and so does this script's stderr for the no-change passes",
    )
    parser.add_argument("--load-seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    parts = {p.strip() for p in args.only.split(",") if p.strip()}
    if parts - set(PARTS):
        parser.error(
            f"--only: unknown part(s) {', '.join(sorted(parts - set(PARTS)))}; known: {', '.join(PARTS)}"
        )
    groups = args.groups or max(1, args.users // 100)
    collector.tune()  # the passes run here as in `sup` (sup/common/collector.py)
    if args.serve_log_level == "debug":  # the no-change passes run here: their phases to stderr
        logging.basicConfig(format="%(asctime)s %(name)s: %(message)s")
        logging.getLogger("sup.reconcile.planner").setLevel(logging.DEBUG)
    started_at = uptime()
    print(f"start: {started_at}", file=sys.stderr)
    report = Report(args.keep_going)
    # the ClusterIP range kubeadm gives a cluster: a /16 fills at 65,534 Services, and allocating
    # slowed to ~5 a second at 42,000 (the first 50,000-user run)
    stack = FullStack(Path(tempfile.mkdtemp(prefix="sup-scale-bench-")), service_range="10.96.0.0/12")
    serve: Serve | None = None
    try:
        with report.step("start the servers", fatal=True):
            stack.start()
            widen_ids(stack, args.users + args.samples * 2 + 100)
        with report.step("fill", fatal=True):
            fill(stack, report, args.users, groups)
        first_passes(stack, report, per_target="first" in parts)
        if "nochange" in parts:
            no_change_passes(stack, report)
        if parts & {"push", "load"}:
            with report.step("start sup serve"):
                serve = Serve(stack, args.serve_log_level)
                seconds = serve.settled()
                report.add(
                    "`sup serve` started: its first (full) pass done, outbox empty", f"{seconds:.1f} s"
                )
            if serve is not None and "push" in parts:
                push_to_login(serve, report, args.samples)
            if serve is not None and "load" in parts:
                scim_load(serve, report, args.users, args.load_seconds, args.concurrency)
            if serve is not None:
                memory(serve, report)
        sizes(stack, report)
    except StepFailed:
        pass
    except BaseException as exc:  # outside any step (a bug, Ctrl-C): still print what was measured
        traceback.print_exc()
        report.failed.append("the run")
        report.add("the run: **FAILED** outside a step", f"{type(exc).__name__}: {str(exc)[:300]}")
    finally:
        if serve is not None:
            serve.stop()
        stack.stop()
    print(
        f"\n{args.users:,} users, {groups:,} groups and Slurm accounts; {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; work dir {stack.work}\n"
        f"start: {started_at}\nend:   {uptime()}\n"
    )
    report.print()
    if not report.failed and args.serve_log_level == "warning":
        shutil.rmtree(stack.work, ignore_errors=True)  # kept after a failure or on request: serve.log
    if report.failed:
        print(f"\nfailed steps: {', '.join(report.failed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
