"""Bulk onboarding benchmark: `sup import` then `sup reconcile` into real LDAP and Slurm, against the
raw floor measured in the same run.

    .venv/bin/python bench/import_bench.py [--users 10000] [--groups 1000] [--accounts 100]

Starts its own slapd (tests/support/slapd.py, rfc2307bis) and, for each measurement, a fresh munge +
MariaDB + slurmdbd (tests/support/slurmdbd.py: the cost of sacctmgr calls grows with what the
accounting database holds). The input: `groups.yaml` with the groups (the first --accounts of them
are labs) and one Slurm account per lab bound to its group; `users.csv` (docs/import.md's header) with one
ed25519 key per user, each user in one lab and one other group.

- **SUP**: the `sup` command as an operator runs it, as subprocesses on a fresh SQLite store:
  `sup import groups.yaml users.csv` (both files checked and written as one import), then
  `sup reconcile --json` (LDAP and Slurm).
- **raw floor**: the same LDAP entries (those of SUP's plan for an empty base) in one `ldapadd` of an
  LDIF file, plus batched `sacctmgr -i add`: one `add account` for all accounts, one `add user` per
  account with all its users (associations cannot share a call across accounts).
- **no-change re-run**: the import and the reconcile again; they must write nothing (store audit
  log and outbox unchanged, zero changes planned).

Order: SUP's import, the raw LDAP load (into an empty base of the same slapd, before SUP's own LDAP
load, so raw gets the emptier directory), the raw Slurm load (fresh slurmdbd), then SUP's reconcile
(another fresh slurmdbd). Prints a Markdown table. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy import func, select  # noqa: E402

from bench.ldap_bench import entries_of  # noqa: E402
from sup.config import Settings  # noqa: E402
from sup.reconcile.planner import run_pass  # noqa: E402
from sup.store import migrate  # noqa: E402
from sup.store.models import AuditEntry, OutboxMark  # noqa: E402
from sup.store.session import make_engine, make_sessionmaker  # noqa: E402
from tests.support.keys import ed25519_key  # noqa: E402
from tests.support.slapd import SERVICE_DN, SERVICE_PASSWORD, SlapdServer  # noqa: E402
from tests.support.slurmdbd import SlurmdbdServer  # noqa: E402

SUP = str(Path(sys.executable).parent / "sup")
CLUSTER = "bench"


def lab(a: int) -> str:
    return f"lab{a:03d}"


def write_input(work: Path, users: int, groups: int, accounts: int) -> tuple[Path, Path]:
    rng = random.Random(7)  # noqa: S311 - a reproducible sample, not a secret
    others = [f"grp{g:04d}" for g in range(accounts, groups)]
    group_file = work / "groups.yaml"
    with group_file.open("w") as f:
        f.write("groups:\n")
        for a in range(accounts):
            f.write(f"  - {{name: {lab(a)}, description: Lab {a}}}\n")
        for name in others:
            f.write(f"  - {{name: {name}}}\n")
        f.write("slurm_accounts:\n")
        for a in range(accounts):
            f.write(f"  - {{name: {lab(a)}, group: {lab(a)}, fairshare: 10}}\n")
    user_file = work / "users.csv"
    with user_file.open("w") as f:
        f.write("username,email,display_name,groups,ssh_public_keys\n")
        for i in range(users):
            name = f"user{i:05d}"
            joined = [lab(i % accounts), *(rng.sample(others, 1) if others else [])]
            f.write(f"{name},{name}@example.org,User {i},{';'.join(joined)},{ed25519_key(name)}\n")
    return group_file, user_file


TIMES: dict[str, float] = {}  # step -> wall-clock seconds
CPU: dict[str, float] = {}  # step -> CPU seconds of the `sup` process (the machine may be shared)


def sup(label: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run([SUP, *args], env=env, capture_output=True, text=True, check=False)  # noqa: S603
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    TIMES[label] = elapsed
    CPU[label] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result.returncode != 0:
        raise RuntimeError(f"sup {' '.join(args)} exited {result.returncode}: {result.stderr[-2000:]}")
    return result


def settings_env(url: str, ldap: dict[str, Any], server: SlurmdbdServer | None, work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUP_")}
    env["SUP_DATABASE_URL"] = url
    env.update({f"SUP_LDAP__{k.upper()}": str(v) for k, v in ldap.items()})
    if server is None:
        return env
    env.update(
        SUP_SLURM__CLUSTER=CLUSTER,
        SUP_SLURM__SACCTMGR=server.bin["sacctmgr"],
        SUP_SLURM__LOCK_DIR=str(work),
        SLURM_CONF=str(server.slurm_conf),
    )
    return env


def ldif(entries: list[tuple[str, dict[str, list[str]]]]) -> str:
    def line(key: str, value: str) -> str:
        safe = value.isascii() and value.isprintable() and not value.startswith((" ", ":", "<"))
        if safe and not value.endswith(" "):
            return f"{key}: {value}"
        return f"{key}:: {base64.b64encode(value.encode()).decode()}"

    blocks = []
    for dn, attributes in entries:
        lines = [line("dn", dn)] + [line(k, v) for k, values in attributes.items() for v in values]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def fresh_slurmdbd() -> SlurmdbdServer:
    server = SlurmdbdServer(cluster=CLUSTER)
    server.start()
    return server


def counts(url: str) -> tuple[int, int]:
    engine = make_engine(url)
    with engine.connect() as connection:
        audit = connection.scalar(select(func.count()).select_from(AuditEntry)) or 0
        marks = connection.scalar(select(func.count()).select_from(OutboxMark)) or 0
    engine.dispose()
    return audit, marks


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--accounts", type=int, default=100)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sup-import-bench-"))
    work.chmod(0o755)  # the Slurm lock dir: sacctmgr and slurmdbd run as other users
    times = TIMES
    facts: dict[str, Any] = {}
    slapd = SlapdServer("rfc2307bis").start()
    try:
        group_file, user_file = write_input(work, args.users, args.groups, args.accounts)
        sup_base, raw_base = slapd.new_base("sup"), slapd.new_base("raw")
        url = f"sqlite:///{work / 'sup.db'}"
        migrate.upgrade(url)

        # 1. SUP's import (an import reads no target).
        env = settings_env(url, slapd.ldap_settings(sup_base), None, work)
        result = sup(
            "sup import groups.yaml users.csv", "import", str(group_file), str(user_file), "--json", env=env
        )
        facts["import"] = json.loads(result.stdout)["summary"]

        # 2. The raw LDAP floor: SUP's entries for an empty base, in one ldapadd.
        raw_settings = Settings(database_url=url, ldap=slapd.ldap_settings(raw_base))
        planned = run_pass(raw_settings, make_sessionmaker(make_engine(url)), only=["ldap"])
        entries = entries_of(planned.changes)
        facts["ldap entries"] = len(entries)
        (work / "raw.ldif").write_text(ldif(entries))
        started = time.perf_counter()
        subprocess.run(  # noqa: S603
            [  # noqa: S607 - ldapadd from ldap-utils, on PATH
                "ldapadd",
                "-x",
                "-H",
                slapd.url,
                "-D",
                SERVICE_DN,
                "-w",
                SERVICE_PASSWORD,
                "-f",
                str(work / "raw.ldif"),
            ],
            check=True,
            capture_output=True,
        )
        times["raw: one ldapadd"] = time.perf_counter() - started

        # 3. The raw Slurm floor on a fresh slurmdbd: batched sacctmgr adds.
        server = fresh_slurmdbd()
        try:
            names = ",".join(lab(a) for a in range(args.accounts))
            started = time.perf_counter()
            server.sacctmgr("add", "account", names, f"cluster={CLUSTER}", "fairshare=10")
            for a in range(args.accounts):
                members = ",".join(f"user{i:05d}" for i in range(a, args.users, args.accounts))
                server.sacctmgr("add", "user", members, f"account={lab(a)}", f"cluster={CLUSTER}")
            times["raw: batched sacctmgr adds"] = time.perf_counter() - started
            facts["raw sacctmgr calls"] = 1 + args.accounts
        finally:
            server.stop()

        # 4. SUP's reconcile on another fresh slurmdbd, then the no-change re-run.
        server = fresh_slurmdbd()
        try:
            env = settings_env(url, slapd.ldap_settings(sup_base), server, work)
            result = sup("sup reconcile (LDAP + Slurm)", "reconcile", "--json", env=env)
            first = json.loads(result.stdout)
            facts["reconcile"] = {
                t["target"]: (t["state"], t["changes"], len(t["failed"])) for t in first["targets"]
            }
            rows = server.show("association", "where", f"cluster={CLUSTER}", "format=User")
            facts["associations"] = sum(1 for (user,) in rows if user and user != "root")

            before = counts(url)
            r1 = sup(
                "re-run: sup import groups.yaml users.csv",
                "import",
                str(group_file),
                str(user_file),
                "--json",
                env=env,
            )
            r2 = sup("re-run: sup reconcile", "reconcile", "--json", env=env)
            facts["re-run changes"] = (
                len(json.loads(r1.stdout)["changes"]),
                sum(t["changes"] for t in json.loads(r2.stdout)["targets"]),
            )
            facts["re-run store writes"] = tuple(a - b for a, b in zip(counts(url), before, strict=True))
        finally:
            server.stop()
    finally:
        slapd.stop()
        shutil.rmtree(work, ignore_errors=True)

    sup_total = times["sup import groups.yaml users.csv"] + times["sup reconcile (LDAP + Slurm)"]
    raw_total = times["raw: one ldapadd"] + times["raw: batched sacctmgr adds"]
    rerun = times["re-run: sup import groups.yaml users.csv"]
    print(
        f"\n{args.users} users, {args.groups} groups, {args.accounts} Slurm accounts; "
        f"{facts['ldap entries']} LDAP entries, {facts['associations']} associations; "
        f"{os.cpu_count()} cores, Python {platform.python_version()}\n"
    )
    print("| step | seconds | CPU s of `sup` |\n|---|---:|---:|")
    cpu = list(CPU.values())
    sup_steps = [n for n in times if n.startswith(("sup ", "re-run"))]
    cpu_of = dict(zip(sup_steps, cpu, strict=True))
    for name, seconds in times.items():
        print(
            f"| {name} | {seconds:.2f} | {cpu_of[name]:.2f} |"
            if name in cpu_of
            else f"| {name} | {seconds:.2f} | |"
        )
    print(f"| **SUP total (import + reconcile)** | **{sup_total:.2f}** |")
    print(f"| **raw floor (ldapadd + sacctmgr)** | **{raw_total:.2f}** |")
    print(f"\nSUP / raw floor: **{sup_total / raw_total:.2f}x** (goal: within 2x)")
    print(
        f"No-change re-run: import {rerun:.2f} s, with the reconcile "
        f"{rerun + times['re-run: sup reconcile']:.2f} s; changes (import, targets) "
        f"{facts['re-run changes']}; store writes (audit rows, outbox marks) {facts['re-run store writes']}"
    )
    print(f"import summary: {facts['import']}")
    print(f"first reconcile (state, changes, failed): {facts['reconcile']}")


if __name__ == "__main__":
    main()
