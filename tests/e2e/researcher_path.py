"""The researcher's whole path on a site installed from the chart (tests/e2e/test_chart_install.py).

What a site has besides SUP, as the test node stands in for it:
- a shared home filesystem: one directory of the host's (`SharedHomes.root`), which Kubernetes sees as
  one ReadWriteMany volume (a hostPath PersistentVolume bound to the site's claim in the users'
  namespace) and the compute node (slurmd, in the private mount namespace of the job cluster's sssd)
  has mounted at /home, so a path in a person's home is the same in their login pod and in their job;
- Slurm's controller and compute node (the session's `slurm_jobs`), reached from the pods at the node's
  address on the pod bridge;
- an identity provider pushing people over SCIM (`Idp`: what Okta or Entra ID sends).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.login_site import Person, Through
from tests.support.kubenode import KubeCluster
from tests.support.slurmctld import JobCluster

HOME_ROOT = "/home"  # accounts.home's default /home/{username}: the compute node's mount point
SCIM_USER = "urn:ietf:params:scim:schemas:core:2.0:User"
SCIM_GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
SCIM_PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
SUP_EXTENSION = "urn:ietf:params:scim:schemas:extension:sup:2.0:User"
JOB = """#!/bin/bash
#SBATCH --output=job-%j.out
echo "ran as $(id -un) in $PWD under account $SLURM_JOB_ACCOUNT"
cat input.txt
"""


@dataclass
class SharedHomes:
    root: Path  # on the host
    claim: str  # the site's ReadWriteMany claim in the users' namespace


def shared_home_volume(cluster: KubeCluster, namespace: str, root: Path, claim: str = "homes") -> SharedHomes:
    """The site's shared home filesystem as Kubernetes sees it: a hostPath PV bound to `claim`."""
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    root.chmod(0o755)
    name = f"{namespace}-{claim}"
    cluster.api.create(
        "/api/v1/persistentvolumes",
        {
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "hostPath": {"path": str(root), "type": "Directory"},
                "claimRef": {"namespace": namespace, "name": claim},
            },
        },
    )
    cluster.api.create(
        f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
        {
            "metadata": {"name": claim},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": name,
                "resources": {"requests": {"storage": "10Gi"}},
            },
        },
    )
    return SharedHomes(root, claim)


def delete_shared_home_volume(cluster: KubeCluster, namespace: str, homes: SharedHomes) -> None:
    cluster.api.delete(f"/api/v1/persistentvolumes/{namespace}-{homes.claim}")


@contextmanager
def homes_on_the_compute_node(jobs: JobCluster, homes: SharedHomes) -> Iterator[None]:
    """The shared home root mounted at /home where slurmd runs (its private mount namespace only)."""
    controller = jobs.controller
    subprocess.run(controller.as_root_argv("mount", "--bind", str(homes.root), HOME_ROOT), check=True)
    try:
        yield
    finally:
        subprocess.run(controller.as_root_argv("umount", "-l", HOME_ROOT), check=False)


class Idp:
    """An identity provider's SCIM client (what Okta or Entra ID sends), with SUP's `scim` token."""

    def __init__(self, sup_url: str, token: str) -> None:
        self.url = f"{sup_url}/scim/v2"
        self.headers = {"Authorization": f"Bearer {token}"}

    def _call(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = httpx.request(method, f"{self.url}/{path}", json=body, headers=self.headers, timeout=30)
        assert response.status_code in (200, 201, 204), response.text
        return dict(response.json()) if response.content else {}

    def group(self, name: str) -> str:
        return str(self._call("POST", "Groups", {"schemas": [SCIM_GROUP], "displayName": name})["id"])

    def person(self, person: Person, email_domain: str = "lab.example") -> str:
        body = {
            "schemas": [SCIM_USER, SUP_EXTENSION],
            "userName": person.name,
            "name": {"givenName": person.name.title(), "familyName": "Researcher"},
            "emails": [{"value": f"{person.name}@{email_domain}", "type": "work", "primary": True}],
            "active": True,
            SUP_EXTENSION: {"sshPublicKeys": [person.public]},
        }
        return str(self._call("POST", "Users", body)["id"])

    def add_member(self, group_id: str, user_id: str) -> None:
        operation = {"op": "add", "path": "members", "value": [{"value": user_id}]}
        self._call("PATCH", f"Groups/{group_id}", {"schemas": [SCIM_PATCH], "Operations": [operation]})

    def suspend(self, user_id: str) -> None:
        operation = {"op": "replace", "value": {"active": False}}
        self._call("PATCH", f"Users/{user_id}", {"schemas": [SCIM_PATCH], "Operations": [operation]})


@dataclass
class JobRun:
    job_id: str
    output: str  # the job's output file, read from the person's home in their login pod
    seconds: float


def write_and_submit(through: Through, person: Person, account: str) -> JobRun:
    """In their login pod, through the gateway: `job.sh` and its input written in $HOME, `sbatch --wait`,
    then the output file the job wrote into $HOME read back there."""
    started = time.monotonic()
    command = (
        "cd ~ && cat > job.sh && echo 'written in the login pod' > input.txt"
        f' && job=$(sbatch --parsable --wait -A {account} job.sh) && echo "JOB=$job"'
        ' && cat "job-$job.out"'
    )
    argv = ["ssh", "-F", str(through.config), "-J", through.jump, f"{person.name}@login", command]
    result = subprocess.run(argv, input=JOB, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"{result.returncode}: {result.stdout}{result.stderr}"
    first, *rest = result.stdout.splitlines()
    assert first.startswith("JOB="), result.stdout
    return JobRun(first.removeprefix("JOB="), "\n".join(rest), time.monotonic() - started)
