"""The researcher's path in the demo (scripts/demo_stack.py): jobs, shared homes, the SSH gateway.

Where a Kubernetes node runs, the demo also starts what a site's compute side is: a Slurm controller
and a compute node (slurmctld + slurmd, in the private mount namespace of an sssd reading SUP's LDAP
base, tests/support/slurmctld.py), and homes on a shared filesystem. The shared filesystem is a
directory of the demo's (`homes/`): in Kubernetes it is one ReadWriteMany volume (a hostPath
PersistentVolume and its claim) that each login pod mounts only its person's directory of, and on
the compute node it is mounted at /home inside the controller's namespace only (the machine's own
/home is not touched). `sup homes serve` makes each person's directory there, as the chart's home
maker does. Then kim connects through the gateway (`sup gateway`'s server, run here), writes a job
script in her home, submits it with `sbatch`, and reads the job's output from her home in her pod.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.login_site import admit_host_to_idle_reporters, slurm_objects, slurm_pod_settings
from tests.e2e.researcher_path import shared_home_volume
from tests.support.gateway_runner import RunningGateway, write_host_key
from tests.support.kubenode import KubeCluster
from tests.support.slapd import SlapdServer
from tests.support.slurmctld import JobCluster, SlurmctldUnavailable, start_job_cluster
from tests.support.slurmdbd import SlurmdbdServer
from tests.support.sssd import SssdUnavailable

HOME_ROOT = "/home"  # examples/demo.json's homes (accounts.home's default) are /home/NAME
HOMES_CLAIM = "homes"
ACCOUNT = "physics"  # kim's lab's Slurm account (examples/demo.json)
PARTITION = "cpu"  # the one partition examples/demo.json lets physics use: the demo node's partition
JOB = """\
#!/bin/bash
#SBATCH --job-name=hello
#SBATCH --output=hello-%j.out
echo "job $SLURM_JOB_ID ran as $(id -un) on $(hostname), account $SLURM_JOB_ACCOUNT"
echo "its working directory: $PWD"
"""


def say(message: str) -> None:
    print(message, flush=True)


def start_jobs(slapd: SlapdServer, slurmdbd: SlurmdbdServer) -> JobCluster | None:
    """slurmctld + slurmd beside the demo's slurmdbd, resolving users through an sssd of their own
    that reads SUP's LDAP base; None, saying why, where this machine cannot run them."""
    try:
        say("starting slurmctld and slurmd (a compute node, resolving people through sssd) ...")
        return start_job_cluster(slapd, slurmdbd, partition=PARTITION)
    except (SlurmctldUnavailable, SssdUnavailable) as exc:
        say(f"no Slurm controller here ({exc}): no job runs")
        return None


def shared_homes(node: KubeCluster, jobs: JobCluster, namespace: str, directory: Path) -> dict[str, Any]:
    """The shared home filesystem (see the module): its volume and claim in `namespace`, mounted at
    /home where the jobs run; returns the `kube` settings that use it."""
    homes = shared_home_volume(node, namespace, directory / "homes", HOMES_CLAIM)
    # /home in the controller's private mount namespace only: what a compute node mounts (for the
    # demo's life: the namespace ends with the controller)
    subprocess.run(
        jobs.controller.as_root_argv("mount", "--bind", str(homes.root), HOME_ROOT),
        check=True,
        capture_output=True,
    )
    return {"home_mode": "shared", "shared_home_claim": HOMES_CLAIM, "home_root": HOME_ROOT}


def slurm_in_pods(node: KubeCluster, jobs: JobCluster, namespace: str) -> dict[str, Any]:
    """The site's Slurm client configuration and munge key in `namespace`, and the `kube` settings
    that let login pods reach the controller and the node at the node's address."""
    controller = jobs.controller
    slurm_objects(node, namespace, controller.client_conf(node.pod_gateway), controller.munge_key)
    return slurm_pod_settings(node, controller)


@contextlib.contextmanager
def home_maker(sup: str, env: dict[str, str], settings: dict[str, Any], directory: Path) -> Iterator[None]:
    """`sup homes serve` on this machine, making the people's directories in `homes/`."""
    config = directory / "homes.yaml"
    kube = settings["kube"]
    config.write_text(
        yaml.safe_dump(
            {
                "database_url": settings["database_url"],
                "home_dirs": {
                    "namespace": kube["namespace"],
                    "kubeconfig": kube["kubeconfig"],
                    "mount": str(directory / "homes"),
                    "home_root": HOME_ROOT,
                },
            }
        )
    )
    log = (directory / "sup-homes.log").open("w")
    process = subprocess.Popen(
        [sup, "homes", "serve"], env={**env, "SUP_CONFIG": str(config)}, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        yield
    finally:
        process.terminate()
        process.wait(timeout=15)


def start_gateway(node: KubeCluster, namespace: str, url: str, token: str, directory: Path) -> RunningGateway:
    """`sup gateway`'s server in this process, reaching a login pod by its headless Service's DNS
    name at the route's port, as inside the cluster: its event loop asks the cluster's DNS for
    `*.svc` names (this machine does not use it); its NetworkPolicy in the namespace admits this
    machine to the login pods' idle reporters, as the chart's does for the gateway's pods."""
    admit_host_to_idle_reporters(node, namespace, "demo-gateway")
    key = directory / "gateway_host_key"
    if not key.exists():
        write_host_key(key)
    return RunningGateway(url, key, token=token, address=None, resolve=node.resolve, wake_timeout_seconds=150)


def kim_runs_a_job(gateway: RunningGateway, key: Path, directory: Path) -> None:
    """kim, through the gateway: writes a job script in her home, `sbatch`es it, reads its output."""
    config = directory / "kim_ssh_config"
    config.write_text(
        "Host *\n"
        f"    IdentityFile {key}\n"
        "    IdentitiesOnly yes\n"
        "    IdentityAgent none\n"
        f"    UserKnownHostsFile {directory / 'known_hosts'}\n"
        "    StrictHostKeyChecking accept-new\n"
        "    BatchMode yes\n"
        "    ConnectTimeout 90\n"
        "    LogLevel ERROR\n"
    )
    jump = f"kim@127.0.0.1:{gateway.port}"
    ssh = ["ssh", "-F", str(config), "-J", jump, "kim@login"]
    say(f"\n== kim, through the gateway: ssh -J {jump} kim@login ==")
    deadline = time.monotonic() + 120  # her pod starts, her key and home reach it
    while True:
        landed = subprocess.run([*ssh, "id -un; hostname"], capture_output=True, text=True, timeout=180)
        if landed.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    if landed.returncode != 0:
        raise SystemExit(f"ssh -J into kim's login pod failed ({landed.returncode}): {landed.stderr.strip()}")
    say(f"  landed as {' on '.join(landed.stdout.split())}")
    say("  $ cat > ~/hello.sh   (a job script in her home, on the shared filesystem)")
    for line in JOB.splitlines():
        say(f"    {line}")
    command = (
        f"cd ~ && cat > hello.sh && job=$(sbatch --parsable --wait -A {ACCOUNT} hello.sh)"
        ' && echo "submitted batch job $job, done" && cat "hello-$job.out"'
    )
    wrote = subprocess.run([*ssh, command], input=JOB, capture_output=True, text=True, timeout=300)
    say(f"  $ sbatch --wait -A {ACCOUNT} hello.sh; cat hello-JOBID.out   (in her pod, after the job)")
    for line in (wrote.stdout + wrote.stderr).splitlines():
        say(f"    {line}")
    if wrote.returncode != 0:
        raise SystemExit(f"kim's job did not run ({wrote.returncode})")
