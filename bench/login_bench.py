"""Seconds from the identity provider to a researcher's shell and first job, on the real test node.

    .venv/bin/python bench/login_bench.py [--users 1000] [--samples 10]

The researcher's whole path (issue 25): homes on a shared filesystem (a host directory that is one
ReadWriteMany volume in Kubernetes, mounted at /home where slurmd runs; `sup homes serve` makes each
person's directory), and people reach their pod through the SSH gateway (`ssh -J`).

Starts, as the tests do (tests/support): slapd, munge + MariaDB + slurmdbd, an sssd with slurmctld +
slurmd in its namespace (they resolve SUP's directory), and a real single-node Kubernetes (containerd,
kubelet, kube-proxy, kube-router) with SUP's login image imported. The store (SQLite) is filled with
`--users` people (one key each) in 10 groups bound to Slurm accounts and provisioned by a first full
pass into LDAP and Slurm. They get no login pod: `kube.login_groups` is `[login]`, a group created
over SCIM and bound to the Slurm account `gpu` (one node cannot run 1,000 pods).
Then, with `sup serve` running (its reconciler on), for each of `--samples` new people one after the
other: SCIM `POST /Users` (with an SSH key), then `PATCH /Groups/<login>` adding them, and from the
POST on:
  (a) `ssh -J PERSON@GATEWAY PERSON@login id` succeeds with their key, and
  (b) in that pod, `job.sh` written in $HOME, `sbatch --wait -A gpu job.sh` done, and the output file
      the job wrote into $HOME read there (the job ran on the node as them, in their home).
Prints the median and p95 of each and where the seconds went (store write, pod created, scheduled,
Ready, home directory made, first ssh, job done). Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import yaml

from bench.e2e_bench import fill_store
from bench.fullstack import CORE_GROUP, scim_push
from sup.config import Settings
from sup.reconcile.planner import run_pass
from sup.store import migrate
from sup.store.session import make_engine, make_sessionmaker
from tests.e2e.login_site import (
    Through,
    admit_host_to_idle_reporters,
    new_person,
    slurm_objects,
    slurm_pod_settings,
)
from tests.e2e.researcher_path import homes_on_the_compute_node, shared_home_volume, write_and_submit
from tests.support.cli import run_sup, sup_env
from tests.support.gateway_runner import RunningGateway, write_host_key
from tests.support.images import LOGIN_IMAGE, build_images
from tests.support.kubenode import KubeCluster
from tests.support.server import SupServer
from tests.support.slapd import SlapdServer
from tests.support.slurmctld import start_job_cluster
from tests.support.slurmdbd import SlurmdbdServer


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def spread(samples: list[float]) -> str:
    return (
        f"median {statistics.median(samples):.2f} s, p95 {p95(samples):.2f} s, "
        f"min {min(samples):.2f} s, max {max(samples):.2f} s ({len(samples)} samples)"
    )


def print_rows(rows: list[tuple[str, str]]) -> None:
    """The load now, then the rows as a Markdown table (what BENCHMARKS.md records)."""
    print(f"load average at the end: {os.getloadavg()}")
    print("| step | result |\n|---|---|")
    for step, value in rows:
        print(f"| {step} | {value} |")


def ssh(key: Path, user: str, host: str, command: str, known: Path) -> subprocess.CompletedProcess[str]:
    argv = [
        "ssh", "-i", str(key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
        "-o", "ConnectTimeout=5", "-o", f"UserKnownHostsFile={known}",
        "-o", "StrictHostKeyChecking=accept-new", "-o", "LogLevel=ERROR", f"{user}@{host}", command,
    ]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)  # noqa: S603 - our argv


def pod_times(cluster: KubeCluster, namespace: str, pod: str) -> dict[str, float]:
    """When the pod was created, scheduled and Ready (the API server's clock, epoch seconds)."""
    found = cluster.api.get(f"/api/v1/namespaces/{namespace}/pods/{pod}") or {}

    def epoch(text: str) -> float:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

    times = {"created": epoch(found["metadata"]["creationTimestamp"])} if found else {}
    for condition in found.get("status", {}).get("conditions", []):
        if condition["type"] in ("PodScheduled", "Ready") and condition["status"] == "True":
            times[condition["type"]] = epoch(condition["lastTransitionTime"])
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=10)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sup-login-bench-"))
    slapd, slurmdbd = SlapdServer("rfc2307bis"), SlurmdbdServer("bench")
    jobs = cluster = server = None
    path = contextlib.ExitStack()  # the researcher's path: home maker, /home on the node, gateway
    rows: list[tuple[str, str]] = []
    try:
        images = build_images()
        slapd.start()
        slurmdbd.start()
        jobs = start_job_cluster(slapd, slurmdbd)
        cluster = KubeCluster().start()
        cluster.import_image(images.login)
        controller = jobs.controller
        namespace = cluster.new_namespace("bench", pod_security="restricted")
        homes = shared_home_volume(cluster, namespace, work / "homes")
        slurm_objects(cluster, namespace, controller.client_conf(cluster.pod_gateway), controller.munge_key)
        config: dict[str, Any] = {
            "database_url": f"sqlite:///{work / 'sup.db'}",
            "ldap": dict(jobs.ldap),
            "slurm": {"cluster": jobs.cluster, "sacctmgr": slurmdbd.bin["sacctmgr"], "lock_dir": str(work)},
            "kube": {
                "namespace": namespace,
                "kubeconfig": str(cluster.kubeconfig),
                **cluster.login_settings(LOGIN_IMAGE),
                **slurm_pod_settings(cluster, controller),
                "login_groups": ["login"],
                "home_mode": "shared",
                "shared_home_claim": homes.claim,
                "home_root": "/home",
            },
            "gateway": {"idle_seconds": 3600},
            "home_dirs": {
                "namespace": namespace,
                "kubeconfig": str(cluster.kubeconfig),
                "mount": str(homes.root),
                "home_root": "/home",
            },
        }
        os.environ["SLURM_CONF"] = str(slurmdbd.slurm_conf)  # sacctmgr's, as an operator sets it
        migrate.upgrade(config["database_url"])
        settings = Settings.model_validate(config)
        started = time.perf_counter()
        fill_store(settings, args.users, 10)
        rows.append(
            (
                f"fill the store: {args.users} users, 10 groups and accounts",
                f"{time.perf_counter() - started:.1f} s",
            )
        )
        sessions = make_sessionmaker(make_engine(settings.database_url))
        # Two passes: the first writes the POSIX identities, the second the Slurm associations that
        # wait for them (slurmctld looks a new user up when their first association arrives).
        for which in ("first", "second"):
            started = time.perf_counter()
            done = run_pass(settings, sessions, apply=True)
            applied = ", ".join(
                f"{t.target} {t.state}: {len(t.applied)} applied, {len(t.failed)} failed"
                for t in done.targets
            )
            took = time.perf_counter() - started
            rows.append((f"{which} full pass (LDAP, Slurm; no login pods)", f"{took:.1f} s ({applied})"))
        found = slurmdbd.show("association", "where", f"cluster={jobs.cluster}", "format=User")
        people = {row[0] for row in found if row and row[0] and row[0] != "root"}
        rows.append(("people with an association before the samples", str(len(people))))

        config_file = work / "sup.yaml"
        config_file.write_text(yaml.safe_dump(config))
        env = sup_env(SUP_CONFIG=str(config_file), SLURM_CONF=str(slurmdbd.slurm_conf))
        admin = run_sup("token", "create", "--name", "bench", "--role", "admin", env=env).stdout.strip()
        scim = run_sup("token", "create", "--name", "bench-scim", "--role", "scim", env=env).stdout.strip()
        gateway_token = run_sup(
            "token", "create", "--name", "gw", "--role", "gateway", env=env
        ).stdout.strip()
        server = SupServer(env, work / "serve.log")
        maker_log = (work / "homes.log").open("w")
        maker = subprocess.Popen(  # noqa: S603 - our argv
            [str(Path(sys.executable).parent / "sup"), "homes", "serve"],
            env=env,
            stdout=maker_log,
            stderr=subprocess.STDOUT,
        )
        path.callback(maker.terminate)
        path.enter_context(homes_on_the_compute_node(jobs, homes))
        admit_host_to_idle_reporters(cluster, namespace, "bench-gateway")
        # the gateway reaches a pod by its headless Service's name, looked up in the cluster's DNS
        gateway = RunningGateway(
            server.url,
            write_host_key(work / "gateway_key"),
            token=gateway_token,
            address=None,
            resolve=cluster.resolve,
        )
        path.callback(gateway.stop)
        api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {admin}"}, timeout=30)
        scim_api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {scim}"}, timeout=30)
        group = scim_api.post("/scim/v2/Groups", json={"schemas": [CORE_GROUP], "displayName": "login"})
        group.raise_for_status()
        group_id = group.json()["id"]
        api.post("/api/v1/slurm/accounts", json={"name": "gpu", "group": "login"}).raise_for_status()
        time.sleep(3)

        to_ssh: list[float] = []
        to_job: list[float] = []
        parts: dict[str, list[float]] = {}
        for i in range(args.samples):
            person = new_person(work, f"res{i:03d}")
            t0 = time.time()
            scim_push(scim_api, group_id, person.name, person.public)
            stored = time.time()
            login = f"login-{person.name}"
            through = Through(work, person, gateway.port)
            home = homes.root / person.name
            home_made = 0.0
            while time.time() - t0 < 300:
                if not home_made and home.is_dir() and home.stat().st_uid != 0:
                    home_made = time.time()
                if through.ssh(person.name, "id").returncode == 0:
                    break
                time.sleep(0.2)
            else:
                raise SystemExit(f"{person.name}: no ssh -J within 300 s")
            in_shell = time.time()
            run = write_and_submit(through, person, "gpu")
            if f"ran as {person.name} in {'/home/' + person.name}" not in run.output:
                raise SystemExit(f"{person.name}: the job's output is not theirs: {run.output!r}")
            job_done = time.time()
            to_ssh.append(in_shell - t0)
            to_job.append(job_done - t0)
            pod = pod_times(cluster, namespace, f"{login}-0")
            for name, moment in (
                ("SCIM POST + PATCH answered", stored),
                ("pod object created", pod.get("created", 0)),
                ("pod scheduled", pod.get("PodScheduled", 0)),
                ("pod Ready", pod.get("Ready", 0)),
                ("home directory made (sup homes serve)", home_made),
                ("first ssh -J id", in_shell),
                ("sbatch job's output read in $HOME", job_done),
            ):
                parts.setdefault(name, []).append(moment - t0)
            print(f"  {person.name}: ssh {in_shell - t0:.2f} s, job {job_done - t0:.2f} s", file=sys.stderr)
        rows.append(("**(a) SCIM POST → `ssh -J` runs `id` in the login pod**", spread(to_ssh)))
        rows.append(("**(b) SCIM POST → `sbatch` job's output read in $HOME in the pod**", spread(to_job)))
        for name, samples in parts.items():
            rows.append((f"  from the POST: {name} (median)", f"{statistics.median(samples):.2f} s"))
    finally:
        path.close()
        if server is not None:
            server.stop()
        if cluster is not None:
            cluster.stop()
        if jobs is not None:
            jobs.stop()
        slurmdbd.stop()
        slapd.stop()
    print_rows(rows)


if __name__ == "__main__":
    main()
