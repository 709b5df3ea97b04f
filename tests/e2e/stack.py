"""The whole system for end-to-end tests: a store, the three real targets (a fresh LDAP base DN with a
real sssd reading it, a fresh Slurm cluster in slurmdbd, a fresh Kubernetes namespace), and `sup serve`
as a real process with its reconciler, configured through a SUP_CONFIG file as an operator would.
A job stack (`jobs`) has no Kubernetes: its LDAP base and Slurm cluster are those of a real slurmctld +
slurmd (tests/support/slurmctld.py), so that the people SUP provisions run jobs."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from sup.targets.kube.names import USER_LABEL
from sup.targets.kube.names import key as object_key
from sup.targets.ldap import LdapSettings
from sup.targets.ldap.sssd_config import render
from tests.support.cli import run_sup, sup_env
from tests.support.kubeapi import KubeApiServer, collection
from tests.support.server import SupServer
from tests.support.slapd import SlapdServer
from tests.support.slurmctld import JobCluster
from tests.support.slurmdbd import SlurmdbdServer
from tests.support.sssd import NEGATIVE_TIMEOUT, SSSD_TEST_OPTIONS, SssdServer

KUBE_KINDS = {
    "persistentvolumeclaims": "home",
    "statefulsets": "login",
    "services": "login",
    "networkpolicies": "login",
}


@dataclass
class Stack:
    slapd: SlapdServer
    slurmdbd: SlurmdbdServer
    kube_server: KubeApiServer | None  # None in a job stack
    config: dict[str, Any]
    directory: Path
    servers: list[SupServer] = field(default_factory=list)
    sssd: SssdServer | None = None  # started by start_sssd (a job stack reads `jobs.sssd`)
    jobs: JobCluster | None = None

    @property
    def kubeapi(self) -> KubeApiServer:
        assert self.kube_server is not None, "a job stack has no Kubernetes"
        return self.kube_server

    # --- running SUP ----------------------------------------------------------------------------------

    @property
    def config_file(self) -> Path:
        path = self.directory / "sup.yaml"
        path.write_text(yaml.safe_dump(self.config))
        path.chmod(0o600)
        return path

    def env(self) -> dict[str, str]:
        return sup_env(SUP_CONFIG=str(self.config_file), SLURM_CONF=str(self.slurmdbd.slurm_conf))

    def sup(self, *args: str) -> str:
        result = run_sup(*args, env=self.env())
        assert result.returncode == 0, result.stderr
        return result.stdout

    def serve(self, name: str = "serve") -> SupServer:
        server = SupServer(self.env(), self.directory / f"{name}-{len(self.servers)}.log")
        self.servers.append(server)
        return server

    def token(self, role: str = "admin") -> dict[str, str]:
        secret = self.sup("token", "create", "--name", f"e2e-{role}-{time.monotonic_ns()}", "--role", role)
        return {"Authorization": f"Bearer {secret.strip()}"}

    def start_sssd(self) -> SssdServer:
        ldap = LdapSettings.model_validate(self.config["ldap"])
        self.sssd = SssdServer(
            render(ldap, options=list(SSSD_TEST_OPTIONS)), negative_timeout=NEGATIVE_TIMEOUT
        )
        return self.sssd.start()

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
        if self.sssd is not None:
            self.sssd.stop()

    # --- what each target holds -----------------------------------------------------------------------

    @property
    def cluster(self) -> str:
        return str(self.config["slurm"]["cluster"])

    @property
    def namespace(self) -> str:
        return str(self.config["kube"]["namespace"])

    def getent(self, user: str) -> str | None:
        sssd = self.sssd or (self.jobs.sssd if self.jobs is not None else None)
        assert sssd is not None
        return sssd.getent("passwd", user)

    def associations(self) -> set[tuple[str, str]]:
        """(account, user) of every user association on this test's cluster (but Slurm's root)."""
        rows = self.slurmdbd.show("association", "where", f"cluster={self.cluster}", "format=Account,User")
        return {(account, user) for account, user in rows if user and user != "root"}

    def kube_objects(self) -> dict[str, set[str]]:
        """Names of SUP's objects per kind in this test's namespace."""
        with self.kubeapi.admin() as api:
            return {
                kind: {
                    o["metadata"]["name"]
                    for o in api.items(collection(self.namespace, kind), "app.kubernetes.io/managed-by=sup")
                }
                for kind in KUBE_KINDS
            }

    def kube_names(self, user: str) -> dict[str, str]:
        """The names of the user's objects: the login objects are named by the user, the home claim
        by the uid (found by the claim's user label; `home-?` when there is none yet)."""
        return {**self.login_names(user), "persistentvolumeclaims": self.home_claim(user) or "home-?"}

    def login_names(self, user: str) -> dict[str, str]:
        """The names of the user's objects other than the home claim (named by the user)."""
        key = object_key(user)
        return {
            kind: f"{prefix}-{key}" for kind, prefix in KUBE_KINDS.items() if kind != "persistentvolumeclaims"
        }

    def home_claim(self, user: str) -> str | None:
        with self.kubeapi.admin() as api:
            claims = api.items(
                collection(self.namespace, "persistentvolumeclaims"), f"{USER_LABEL}={object_key(user)}"
            )
        return str(claims[0]["metadata"]["name"]) if claims else None

    def in_kube(self, user: str) -> bool:
        objects = self.kube_objects()
        return all(name in objects[kind] for kind, name in self.kube_names(user).items())


def wait_until(condition: Callable[[], bool], timeout: float = 30, what: str = "condition") -> float:
    """Poll `condition`; return the seconds it took, or fail after `timeout`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached within {timeout} s")


def statuses(server: SupServer, headers: dict[str, str], user: str) -> dict[str, str]:
    body = httpx.get(f"{server.url}/api/v1/users/{user}/status", headers=headers, timeout=10).json()
    return {t["target"]: t["state"] for t in body["targets"]}
