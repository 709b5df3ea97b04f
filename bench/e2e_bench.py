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
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import yaml

from sup.config import Settings
from sup.groups.schemas import GroupCreate
from sup.groups.service import create_group
from sup.reconcile.planner import desired_state, run_pass
from sup.slurm_accounts.schemas import SlurmAccountCreate
from sup.slurm_accounts.service import create_account
from sup.store import migrate
from sup.store.audit import Actor
from sup.store.session import make_engine, make_sessionmaker
from sup.targets.ldap import LdapSettings
from sup.targets.ldap.sssd_config import render
from sup.users.schemas import UserCreate
from sup.users.service import create_user
from tests.e2e.stack import wait_until
from tests.support.cli import run_sup, sup_env
from tests.support.keys import ed25519_key
from tests.support.kubeapi import KubeApiServer
from tests.support.postgres import PostgresServer
from tests.support.server import SupServer
from tests.support.slapd import SlapdServer
from tests.support.slurmdbd import SlurmdbdServer
from tests.support.sssd import SSSD_TEST_OPTIONS, SssdServer

ACTOR = Actor(name="bench", role="admin")
TARGETS = ("ldap", "slurm", "kube")


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


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = call()
    return time.perf_counter() - started, value


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sup-e2e-bench-"))
    postgres, slapd, slurmdbd, kubeapi = (
        PostgresServer(),
        SlapdServer("rfc2307bis"),
        SlurmdbdServer("bench"),
        None,
    )
    sssd = None
    rows: list[tuple[str, str]] = []
    try:
        postgres.start()
        slapd.start()
        slurmdbd.start()
        kubeapi = KubeApiServer().start()
        os.environ["SLURM_CONF"] = str(slurmdbd.slurm_conf)  # for sacctmgr, as an operator sets it
        url = postgres.create_database("bench")
        migrate.upgrade(url)
        config: dict[str, Any] = {
            "database_url": url,
            "ldap": slapd.ldap_settings(slapd.new_base("bench")),
            "slurm": {
                "cluster": slurmdbd.cluster,
                "sacctmgr": slurmdbd.bin["sacctmgr"],
                "lock_dir": str(work),
            },
            "kube": {
                "namespace": kubeapi.new_namespace("bench"),
                "kubeconfig": str(kubeapi.admin_kubeconfig),
            },
        }
        settings = Settings.model_validate(config)
        sssd = SssdServer(
            render(LdapSettings.model_validate(config["ldap"]), options=list(SSSD_TEST_OPTIONS)),
            negative_timeout=1,
        ).start()

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

        config_file = work / "sup.yaml"
        config_file.write_text(yaml.safe_dump(config))
        env = sup_env(SUP_CONFIG=str(config_file), SLURM_CONF=str(slurmdbd.slurm_conf))
        token = run_sup("token", "create", "--name", "bench", "--role", "admin", env=env).stdout.strip()
        scim = run_sup("token", "create", "--name", "bench-scim", "--role", "scim", env=env).stdout.strip()
        server = SupServer(env, work / "serve.log")
        try:
            api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
            scim_api = httpx.Client(
                base_url=server.url, headers={"Authorization": f"Bearer {scim}"}, timeout=30
            )
            wait_until(lambda: api.get("/readyz").json()["reconciler"].get("last_pass_at") is not None, 120)

            def provisioned(name: str) -> Callable[[], bool]:
                def check() -> bool:
                    if sssd is None or sssd.getent("passwd", name) is None:
                        return False
                    rows_ = slurmdbd.show("association", "where", f"user={name}", "format=User")
                    return any(r and r[0] == name for r in rows_)

                return check

            api_times = []
            for i in range(args.samples):
                name = f"new{i:03d}"
                started = time.perf_counter()
                response = api.post("/api/v1/users", json={"username": name, "groups": ["lab000"]})
                response.raise_for_status()
                api_times.append(time.perf_counter() - started + wait_until(provisioned(name), 120))
            rows.append(("**API write → getent via sssd + sacctmgr association**", _spread(api_times)))
            scim_times = []
            for i in range(args.samples):
                name = f"scim{i:03d}"
                started = time.perf_counter()
                created = scim_api.post(
                    "/scim/v2/Users",
                    json={"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": name},
                )
                created.raise_for_status()
                scim_times.append(
                    time.perf_counter() - started + wait_until(provisioned_ldap(sssd, name), 120)
                )
            rows.append(("**SCIM POST /Users → getent via sssd**", _spread(scim_times)))
        finally:
            server.stop()
    finally:
        if sssd is not None:
            sssd.stop()
        if kubeapi is not None:
            kubeapi.stop()
        slurmdbd.stop()
        slapd.stop()
        postgres.stop()
    print("| step | result |\n|---|---|")
    for step, value in rows:
        print(f"| {step} | {value} |")


def provisioned_ldap(sssd: SssdServer | None, name: str) -> Callable[[], bool]:
    return lambda: sssd is not None and sssd.getent("passwd", name) is not None


def _error(error: str | None) -> str:
    return f" ({error})" if error else ""


def _spread(samples: list[float]) -> str:
    return (
        f"**median {statistics.median(samples):.2f} s**, min {min(samples):.2f} s, max {max(samples):.2f} s"
        f" ({len(samples)} samples)"
    )


if __name__ == "__main__":
    main()
