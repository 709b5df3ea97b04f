"""Seconds from approving `sup ssh login`'s device code to a shell in the login pod, on the real test
node (issue 29).

    .venv/bin/python bench/ssh_login_bench.py [--samples 10] [--poll-interval SECONDS]

Starts, as the tests do (tests/support): the real Keycloak (a realm with the device-grant client
and one person), slapd, munge + MariaDB + slurmdbd, slurmctld + slurmd with an sssd (as the login
pods' Slurm), and the real single-node Kubernetes with SUP's login image; then `sup serve` (SQLite,
the Keycloak source, SUP's CA) and the SSH gateway in this process. The person's login pod is
running before the samples: this measures the login, not a pod's start (login_bench.py does that).

Each sample is a laptop with nothing on it (a fresh home): the one-file client runs, prints the
link, the "browser" signs in and approves (tests/support/keycloak.py), and from the moment the
approval returns:
  (a) the client has the certificate and wrote the ssh config (it polls the token endpoint at the
      interval the identity provider asks for, then makes a key and has SUP sign it: the wait for
      the next poll is most of it, so `--poll-interval` sets the realm's), and
  (b) `ssh cluster id -un` answers from the pod, through the gateway, with that certificate.
Prints the median and p95 of each. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import yaml

from bench.login_bench import print_rows, spread
from sup.store import migrate
from tests.e2e.login_site import admit_host_to_idle_reporters, slurm_objects, slurm_pod_settings
from tests.support.cli import run_sup, sup_env
from tests.support.gateway_runner import RunningGateway, write_host_key
from tests.support.images import LOGIN_IMAGE, build_images
from tests.support.keycloak import KeycloakServer
from tests.support.kubenode import KubeCluster
from tests.support.ports import free_port
from tests.support.server import SupServer
from tests.support.slapd import SlapdServer
from tests.support.slurmctld import start_job_cluster
from tests.support.slurmdbd import SlurmdbdServer
from tests.support.ssh_login_client import sign_in
from tests.support.sshd import keygen

PERSON, PASSWORD = "kim", "pw-kim"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument(
        "--poll-interval", type=int, default=None,
        help="the realm's device polling interval in seconds (Keycloak's default: 5)",
    )  # fmt: skip
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sup-ssh-login-bench-"))
    slapd, slurmdbd, keycloak = SlapdServer("rfc2307bis"), SlurmdbdServer("bench"), KeycloakServer()
    running = contextlib.ExitStack()
    rows: list[tuple[str, str]] = []
    try:
        images = build_images()
        keycloak.start()
        running.callback(keycloak.stop)
        realm = keycloak.new_realm()
        realm.add_device_client("sup-ssh")
        if args.poll_interval is not None:
            realm.admin.update_realm(realm.name, {"oauth2DevicePollingInterval": args.poll_interval})
        interval = realm.admin.get_realm(realm.name).get("oauth2DevicePollingInterval", "default")
        rows.append(("the realm's device polling interval", f"{interval} s"))
        realm.add_user(PERSON, password=PASSWORD)
        slapd.start()
        running.callback(slapd.stop)
        slurmdbd.start()
        running.callback(slurmdbd.stop)
        jobs = start_job_cluster(slapd, slurmdbd)
        running.callback(jobs.stop)
        cluster = KubeCluster().start()
        running.callback(cluster.stop)
        cluster.import_image(images.login)
        namespace = cluster.new_namespace("bench", pod_security="restricted")
        controller = jobs.controller
        slurm_objects(cluster, namespace, controller.client_conf(cluster.pod_gateway), controller.munge_key)
        keygen(work / "ssh_ca", "sup-ca")
        port = free_port()
        config: dict[str, Any] = {
            "database_url": f"sqlite:///{work / 'sup.db'}",
            "ldap": dict(jobs.ldap),
            "slurm": {"cluster": jobs.cluster, "sacctmgr": slurmdbd.bin["sacctmgr"], "lock_dir": str(work)},
            "kube": {
                "namespace": namespace,
                "kubeconfig": str(cluster.kubeconfig),
                **cluster.login_settings(LOGIN_IMAGE),
                **slurm_pod_settings(cluster, controller),
            },
            "keycloak": {**realm.settings(), "interval_seconds": 0},
            "oidc": {"issuer": realm.issuer, "audience": "sup", "allow_insecure_http": True},
            "ssh_ca": {"key_file": str(work / "ssh_ca"), "login_client_id": "sup-ssh"},
            "gateway": {"idle_seconds": 3600, "public_host": f"127.0.0.1:{port}"},
        }
        migrate.upgrade(config["database_url"])
        config_file = work / "sup.yaml"
        config_file.write_text(yaml.safe_dump(config))
        env = sup_env(SUP_CONFIG=str(config_file), SLURM_CONF=str(slurmdbd.slurm_conf))
        admin = run_sup("token", "create", "--name", "bench", "--role", "admin", env=env).stdout.strip()
        gateway_token = run_sup(
            "token", "create", "--name", "gw", "--role", "gateway", env=env
        ).stdout.strip()
        server = SupServer(env, work / "serve.log")
        running.callback(server.stop)
        admit_host_to_idle_reporters(cluster, namespace, "bench-gateway")
        gateway = RunningGateway(
            server.url, write_host_key(work / "gateway_key"), token=gateway_token, address=None,
            resolve=cluster.resolve, port=port,
        )  # fmt: skip
        running.callback(gateway.stop)
        api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {admin}"}, timeout=30)
        started = time.monotonic()
        while api.get(f"/api/v1/users/{PERSON}").status_code != 200:  # the pull at start
            if time.monotonic() - started > 120:
                raise SystemExit(f"{PERSON} was not provisioned from Keycloak within 120 s")
            time.sleep(0.5)
        cluster.wait_pod_ready(namespace, f"login-{PERSON}-0", timeout=180)
        rows.append(
            ("the person's login pod Ready, after `sup serve` started", f"{time.monotonic() - started:.1f} s")
        )

        to_certificate: list[float] = []
        to_shell: list[float] = []
        for i in range(args.samples):
            home = work / f"laptop-{i}"
            (home / ".ssh").mkdir(parents=True, mode=0o700)
            signed = sign_in(server.url, realm, home, PERSON, PASSWORD)
            if signed.done.returncode != 0:
                raise SystemExit(f"sample {i}: sup ssh login failed: {signed.done.stderr}")
            certified = time.monotonic()
            signed.add_defaults()
            shell = signed.ssh("id -un", timeout=120)
            in_shell = time.monotonic()
            if shell.returncode != 0 or shell.stdout != f"{PERSON}\n":
                raise SystemExit(f"sample {i}: ssh cluster failed: {shell.stderr}")
            to_certificate.append(certified - signed.approved_at)
            to_shell.append(in_shell - signed.approved_at)
            print(
                f"  sample {i}: certificate {to_certificate[-1]:.2f} s, shell {to_shell[-1]:.2f} s",
                file=sys.stderr,
            )
        rows.append(("**(a) approval → certificate and ssh config written**", spread(to_certificate)))
        rows.append(("**(b) approval → `ssh cluster` ran `id -un` in the pod**", spread(to_shell)))
        ssh_itself = [b - a for a, b in zip(to_certificate, to_shell, strict=True)]
        rows.append(("  of which `ssh cluster` itself", spread(ssh_itself)))
    finally:
        running.close()
    print_rows(rows)


if __name__ == "__main__":
    main()
