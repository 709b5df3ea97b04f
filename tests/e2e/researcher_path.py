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


REFUSED = "Invalid account or account/partition combination specified"  # Slurm's, no association


@dataclass
class PathSeconds:
    """Seconds from the SCIM push: the first `ssh -J` that lands, the job's output read in $HOME;
    from the suspension: the held session cut, a new job refused."""

    landed: float
    output: float
    cut: float
    refused: float


def researcher_path(
    *,
    cluster: KubeCluster,
    jobs: JobCluster,
    homes: SharedHomes,
    users_namespace: str,
    sup_url: str,
    admin: dict[str, str],
    scim_token: str,
    gateway_port: int,
    directory: Path,
    name: str = "ada",
    lab: str = "optics",
) -> PathSeconds:
    """A lab member's whole path on a site SUP runs (issue 25), asserting each step as they see it:
    pushed over SCIM with a key into the lab group (bound to a Slurm account once by the platform
    team) → `ssh -J` through the gateway into their pod → `job.sh` written in $HOME → `sbatch` → the
    job runs on the compute node as them under the lab's account, in their home, and writes its output
    there → read in the pod. Then, suspended in the IdP: the session they hold is cut, a new job is
    refused."""
    idp = Idp(sup_url, scim_token)
    lab_id = idp.group(lab)
    bound = httpx.post(
        f"{sup_url}/api/v1/slurm/accounts", json={"name": lab, "group": lab}, headers=admin, timeout=30
    )
    assert bound.status_code == 201, bound.text
    person = Person(name, directory / f"{name}_ed25519")
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}@laptop", "-f", str(person.key)],
        check=True,
    )
    pushed = time.monotonic()
    user_id = idp.person(person)
    idp.add_member(lab_id, user_id)
    through = Through(directory, person, gateway_port, cluster.node_ip)
    deadline = time.monotonic() + 240
    attempts: list[str] = []
    while True:
        landed = through.ssh(name, "id -un; hostname; ls -A /home")
        if landed.returncode == 0:
            break
        attempts.append(landed.stderr.strip()[-160:])
        assert time.monotonic() < deadline, f"{name}'s ssh -J never landed: {attempts[-5:]}"
        time.sleep(1)
    landed_seconds = time.monotonic() - pushed
    # their pod, and in it only their own directory of the shared filesystem
    assert landed.stdout.split() == [name, f"login-{name}-0", name], landed.stdout
    run = write_and_submit(through, person, lab)
    output_seconds = time.monotonic() - pushed
    assert f"ran as {name} in /home/{name} under account {lab}" in run.output, run.output
    assert "written in the login pod" in run.output  # the job read the file she wrote in her pod
    # on the shared filesystem itself: her directory, hers alone, and the job's output in it
    uid = int(jobs.sssd.getent("passwd", name).split(":")[2])  # type: ignore[union-attr]
    home = homes.root / name
    assert (home.stat().st_uid, home.stat().st_mode & 0o777) == (uid, 0o700)
    output = home / f"job-{run.job_id}.out"
    assert output.stat().st_uid == uid and "ran as" in output.read_text()

    held = through.hold(name)
    time.sleep(2)
    assert held.poll() is None, "the held session ended by itself"
    suspended = time.monotonic()
    idp.suspend(user_id)
    try:
        held.wait(timeout=120)
    except subprocess.TimeoutExpired:
        held.kill()
        raise AssertionError(f"{name}'s held session was not cut within 120 s of the suspension") from None
    cut_seconds = time.monotonic() - suspended
    deadline = time.monotonic() + 60
    while REFUSED not in (refused := jobs.controller.sbatch(name, "-A", lab, "--wrap", "true")).stderr:
        assert time.monotonic() < deadline, f"{name}'s new job was not refused: {refused.output}"
        time.sleep(1)
    refused_seconds = time.monotonic() - suspended
    assert through.ssh(name, "true").returncode != 0  # and no new session
    assert output.exists()  # her data stays
    return PathSeconds(landed_seconds, output_seconds, cut_seconds, refused_seconds)
