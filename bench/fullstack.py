"""The whole system on real servers, shared by the end-to-end benchmarks (e2e_bench.py, scale_bench.py).

`FullStack` starts PostgreSQL (the store), slapd with a real sssd reading it (negative cache 1 s, as
in the tests), munge + MariaDB + slurmdbd and etcd + kube-apiserver (all from tests/support), and
holds the SUP settings that point at them. `login_checks` is what "a person can log in" means for
these benchmarks: the user resolves through sssd (`getent passwd`, run in sssd's mount namespace with
its own nsswitch), sssd hands out their SSH key (`sss_ssh_authorizedkeys`), and slurmdbd lists their
association (`sacctmgr -nP show assoc where user=NAME`).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from sup.config import Settings
from sup.scim.schemas import SUP_USER_SCHEMA
from sup.store import migrate
from sup.store.session import make_engine, make_sessionmaker
from sup.targets.ldap import LdapSettings
from sup.targets.ldap.sssd_config import render
from tests.e2e.stack import wait_until
from tests.support.cli import run_sup, sup_env
from tests.support.kubeapi import KubeApiServer
from tests.support.postgres import PostgresServer
from tests.support.server import SupServer
from tests.support.slapd import SlapdServer
from tests.support.slurmdbd import SlurmdbdServer
from tests.support.sssd import SSSD_TEST_OPTIONS, SssdServer

TARGETS = ("ldap", "slurm", "kube")
__all__ = ["TARGETS", "FullStack", "LoginTimes", "spread", "timed", "wait_until"]


CORE_USER = "urn:ietf:params:scim:schemas:core:2.0:User"
CORE_GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"


def scim_push(scim: httpx.Client, group_id: str, username: str, key: str) -> None:
    """What an identity provider sends for a new member of a group: `POST /Users` (with the SSH
    key), then `PATCH /Groups/<id>` adding them. Raises on any answer but success."""
    created = scim.post(
        "/scim/v2/Users",
        json={
            "schemas": [CORE_USER, SUP_USER_SCHEMA],
            "userName": username,
            SUP_USER_SCHEMA: {"sshPublicKeys": [key]},
        },
    )
    created.raise_for_status()
    added = scim.patch(
        f"/scim/v2/Groups/{group_id}",
        json={
            "schemas": [PATCH_OP],
            "Operations": [{"op": "add", "path": "members", "value": [{"value": created.json()["id"]}]}],
        },
    )
    added.raise_for_status()


class FullStack:
    """Start with `start()`, always `stop()` (stops whatever did start, in reverse order)."""

    def __init__(self, work: Path, name: str = "bench", service_range: str = "10.0.0.0/16") -> None:
        self.work = work
        self.name = name
        self.postgres = PostgresServer()
        self.slapd = SlapdServer("rfc2307bis")
        self.slurmdbd = SlurmdbdServer(name)
        self.kubeapi: KubeApiServer | None = None
        self.service_range = service_range
        self.sssd: SssdServer | None = None
        self.url = ""
        self.config: dict[str, Any] = {}

    def start(self) -> FullStack:
        self.work.chmod(0o755)  # the Slurm lock dir: sacctmgr and slurmdbd run as other users
        self.postgres.start()
        self.slapd.start()
        self.slurmdbd.start()
        self.kubeapi = KubeApiServer(service_range=self.service_range).start()
        os.environ["SLURM_CONF"] = str(self.slurmdbd.slurm_conf)  # for sacctmgr, as an operator sets it
        self.url = self.postgres.create_database(self.name)
        migrate.upgrade(self.url)
        self.config = {
            "database_url": self.url,
            "ldap": self.slapd.ldap_settings(self.slapd.new_base(self.name)),
            "slurm": {
                "cluster": self.slurmdbd.cluster,
                "sacctmgr": self.slurmdbd.bin["sacctmgr"],
                "lock_dir": str(self.work),
            },
            "kube": {
                "namespace": self.kubeapi.new_namespace(self.name),
                "kubeconfig": str(self.kubeapi.admin_kubeconfig),
            },
        }
        self.sssd = SssdServer(
            render(LdapSettings.model_validate(self.config["ldap"]), options=list(SSSD_TEST_OPTIONS)),
            negative_timeout=1,
        ).start()
        return self

    def stop(self) -> None:
        if self.sssd is not None:
            self.sssd.stop()
        if self.kubeapi is not None:
            self.kubeapi.stop()
        self.slurmdbd.stop()
        self.slapd.stop()
        self.postgres.stop()

    @property
    def settings(self) -> Settings:
        return Settings.model_validate(self.config)

    @property
    def namespace(self) -> str:
        return str(self.config["kube"]["namespace"])

    @property
    def base_dn(self) -> str:
        return str(self.config["ldap"]["base_dn"])

    def sessions(self) -> Any:
        return make_sessionmaker(make_engine(self.url))

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a `sup` command (or `sup serve`) on this stack: the config file, SLURM_CONF."""
        config_file = self.work / "sup.yaml"
        config_file.write_text(yaml.safe_dump(self.config))
        return sup_env(SUP_CONFIG=str(config_file), SLURM_CONF=str(self.slurmdbd.slurm_conf), **extra)

    def token(self, env: dict[str, str], name: str, role: str) -> str:
        result = run_sup("token", "create", "--name", name, "--role", role, env=env)
        if result.returncode != 0:
            raise RuntimeError(f"sup token create exited {result.returncode}: {result.stderr[-2000:]}")
        return result.stdout.strip()

    def serve(self, env: dict[str, str], log: str = "serve.log", log_level: str = "warning") -> SupServer:
        """`sup serve` with these settings (reconciler on), ready (`/readyz` answers 200)."""
        return SupServer(env, self.work / log, log_level=log_level)

    # --- what a node sees ----------------------------------------------------------------------------

    def resolves(self, name: str) -> bool:
        return self.sssd is not None and self.sssd.getent("passwd", name) is not None

    def has_key(self, name: str, key: str) -> bool:
        blob = key.split()[1]
        return self.sssd is not None and any(blob in line for line in self.sssd.authorized_keys(name))

    def has_association(self, name: str) -> bool:
        rows = self.slurmdbd.show("association", "where", f"user={name}", "format=User")
        return any(r and r[0] == name for r in rows)

    def login_checks(self, name: str, key: str | None) -> dict[str, Callable[[], bool]]:
        """The conditions of "can log in and submit a job", by label; without `key` no key check."""
        checks: dict[str, Callable[[], bool]] = {"getent": lambda: self.resolves(name)}
        if key is not None:
            checks["ssh key"] = lambda: self.has_key(name, key)
        checks["association"] = lambda: self.has_association(name)
        return checks


@dataclass
class LoginTimes:
    """Seconds from a write's start until each login condition first held, one entry per sample."""

    total: list[float] = field(default_factory=list)
    each: dict[str, list[float]] = field(default_factory=dict)

    def wait(
        self,
        started: float,
        checks: dict[str, Callable[[], bool]],
        timeout: float = 300,
        interval: float = 0.1,
    ) -> float:
        """Poll the checks not yet met (each one is not asked again once it held) until all hold."""
        pending = dict(checks)
        seen: dict[str, float] = {}
        deadline = time.perf_counter() + timeout
        while pending:
            for label, check in list(pending.items()):
                if check():
                    seen[label] = time.perf_counter() - started
                    del pending[label]
            if not pending:
                break
            if time.perf_counter() > deadline:
                raise TimeoutError(f"not reached within {timeout} s: {', '.join(pending)}")
            time.sleep(interval)
        for label, seconds in seen.items():
            self.each.setdefault(label, []).append(seconds)
        total = max(seen.values())
        self.total.append(total)
        return total


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = call()
    return time.perf_counter() - started, value


def percentile(samples: list[float], fraction: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default); exact for one sample."""
    ordered = sorted(samples)
    if len(ordered) == 1:
        return ordered[0]
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def spread(samples: list[float]) -> str:
    return (
        f"**median {statistics.median(samples):.2f} s**, min {min(samples):.2f} s, max {max(samples):.2f} s"
        f" ({len(samples)} samples)"
    )
