"""SUP's main job on one machine: a local stack of the real servers SUP provisions, and SUP itself.

Started by scripts/demo. It brings up, on free loopback ports in temp dirs, the same servers the
test suite uses (tests/support): OpenLDAP slapd with an sssd reading it (as the nodes would), munge +
MariaDB + slurmdbd with the real sacctmgr, and etcd + kube-apiserver. It writes the SUP settings file
that points at them, runs `sup serve` (API and reconciler) on the SQLite store in the demo directory,
loads examples/demo.json through the API, waits until the reconciler has provisioned every active
user into all three targets, and prints what each target now holds: `getent passwd` through sssd,
`sacctmgr show associations`, the Kubernetes objects. On a node, kim then logs in to her pod, and
goes through the gateway to run a Slurm job from her shared home (scripts/demo_path.py). Then it
serves until Ctrl-C (or stops at once with --once). The servers live in temp dirs and are gone when
the demo ends; the store and the homes stay, and the next run provisions them into a fresh stack.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import demo_path  # noqa: E402  (beside this script)

from sup.targets.ldap import LdapSettings  # noqa: E402
from sup.targets.ldap.sssd_config import render  # noqa: E402
from tests.support.images import LOGIN_IMAGE, ImagesUnavailable, build_images  # noqa: E402
from tests.support.kubeapi import KubeApiServer, collection  # noqa: E402
from tests.support.kubenode import KubeCluster, KubeClusterUnavailable  # noqa: E402
from tests.support.slapd import SlapdServer  # noqa: E402
from tests.support.slurmctld import JobCluster  # noqa: E402
from tests.support.slurmdbd import SlurmdbdServer  # noqa: E402
from tests.support.sssd import SSSD_TEST_OPTIONS, SssdServer, SssdUnavailable  # noqa: E402

SUP = str(ROOT / ".venv" / "bin" / "sup")
KINDS = ("persistentvolumeclaims", "statefulsets", "services", "networkpolicies", "configmaps")


def say(message: str) -> None:
    print(message, flush=True)


@contextlib.contextmanager
def running_stack(
    directory: Path,
) -> Iterator[tuple[dict[str, Any], SlurmdbdServer, KubeApiServer, KubeCluster | None, JobCluster | None]]:
    """Start slapd, slurmdbd and a Kubernetes node (or kube-apiserver alone where no node can run)
    with, on a node, a Slurm controller and compute node and shared homes (scripts/demo_path.py);
    yield SUP's settings for them; stop them all."""
    started: list[Any] = []
    try:
        say("starting OpenLDAP slapd ...")
        slapd = SlapdServer("rfc2307bis").start()
        started.append(slapd)
        say("starting munge, MariaDB and slurmdbd ...")
        slurmdbd = SlurmdbdServer(cluster="demo")
        started.append(slurmdbd)
        slurmdbd.start()
        node = start_node()
        jobs = None
        if node is not None:
            started.append(node)
            kubeapi = node.apiserver
            kube: dict[str, Any] = {
                "namespace": node.new_namespace("demo"),
                "kubeconfig": str(node.kubeconfig),
                **node.login_settings(LOGIN_IMAGE),
            }
            jobs = demo_path.start_jobs(slapd, slurmdbd)
            if jobs is not None:
                started.append(jobs)
                kube.update(demo_path.slurm_in_pods(node, jobs, kube["namespace"]))
                kube.update(demo_path.shared_homes(node, jobs, kube["namespace"], directory))
        else:
            say("starting etcd and kube-apiserver (API only: no pod runs) ...")
            kubeapi = KubeApiServer().start()
            started.append(kubeapi)
            kube = {"namespace": kubeapi.new_namespace("demo"), "kubeconfig": str(kubeapi.admin_kubeconfig)}
        settings: dict[str, Any] = {
            "database_url": f"sqlite:///{directory / 'sup.db'}",
            "ldap": jobs.ldap if jobs is not None else slapd.ldap_settings(slapd.new_base("demo")),
            "slurm": {
                "cluster": slurmdbd.cluster,
                "sacctmgr": slurmdbd.bin["sacctmgr"],
                "lock_dir": str(directory / "locks"),
            },
            "kube": kube,
            "reconcile": {"debounce_seconds": 0.5},
        }
        if jobs is not None:
            settings["gateway"] = {}  # SUP answers the gateway (scripts/demo_path.py)
        yield settings, slurmdbd, kubeapi, node, jobs
    finally:
        for server in reversed(started):
            with contextlib.suppress(Exception):
                server.stop()


def start_node() -> KubeCluster | None:
    """A real single-node Kubernetes with SUP's login image, where pods can run (root, the packages
    and binaries scripts/setup --servers installs and builds); None, saying why, where they cannot
    (or with SUP_DEMO_NODE=0): then only the API server runs and no login pod starts."""
    if os.environ.get("SUP_DEMO_NODE") == "0":
        say("SUP_DEMO_NODE=0: no Kubernetes node; login pods are written to the API server but never run")
        return None
    try:
        login = build_images().login
        say(
            "starting a Kubernetes node (etcd, kube-apiserver, kubelet on containerd, kube-proxy,"
            " kube-router) ..."
        )
        node = KubeCluster().start()
    except (KubeClusterUnavailable, ImagesUnavailable) as exc:
        say(f"no Kubernetes node here ({exc}): login pods are written to the API server but never run")
        return None
    try:
        node.import_image(login)
    except BaseException:
        node.stop()
        raise
    return node


def ssh_into_login_pod(
    node: KubeCluster, settings: dict[str, Any], url: str, token: str, directory: Path
) -> None:
    """Give kim a key of the demo's (kept in the demo directory), then `ssh kim@<kim's login Service>
    id` with it, as kim would, and print what it shows."""
    key = directory / "kim_ed25519"
    if not key.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kim@sup-demo", "-f", str(key)], check=True
        )
    headers = {"Authorization": f"Bearer {token}"}
    kim = httpx.get(f"{url}/api/v1/users/kim", headers=headers, timeout=10).json()
    demo_key = Path(f"{key}.pub").read_text().strip()
    keys = kim["ssh_public_keys"]
    if demo_key not in keys:
        answer = httpx.patch(
            f"{url}/api/v1/users/kim",
            json={"ssh_public_keys": [*keys, demo_key]},
            headers=headers,
            timeout=10,
        )
        answer.raise_for_status()
    namespace = settings["kube"]["namespace"]
    service = node.wait_for(
        lambda: node.api.get(f"/api/v1/namespaces/{namespace}/services/login-kim"), "kim's login Service"
    )
    node.wait_pod_ready(namespace, "login-kim-0", timeout=180)
    # the Service is headless: its name gives the pod's own address in the cluster's DNS (asked
    # here: this machine does not use it), where sshd listens on the Service's targetPort
    name = f"login-kim.{namespace}.svc"
    addresses = node.wait_for(lambda: node.resolve(name), f"{name} in the cluster's DNS")
    address, port = addresses[0], str(service["spec"]["ports"][0]["targetPort"])
    argv = [
        "ssh", "-i", str(key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
        "-o", f"UserKnownHostsFile={directory / 'known_hosts'}", "-o", "StrictHostKeyChecking=accept-new",
        "-o", "LogLevel=ERROR", "-p", port, f"kim@{address}", "id; echo HOME=$HOME",
    ]  # fmt: skip
    say(f"\n== kim logs in to her login pod: ssh -i {key} -p {port} kim@{address} ==")
    deadline = time.monotonic() + 90  # the new key reaches the running pod with the kubelet's sync
    while True:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if result.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    for line in (result.stdout or result.stderr).splitlines():
        say(f"  {line}")
    if result.returncode != 0:
        raise SystemExit(f"ssh into kim's login pod failed ({result.returncode})")


def start_sssd(settings: dict[str, Any]) -> SssdServer | None:
    """sssd as on a login node (needs root for its private mount namespace); None when not possible."""
    try:
        ldap = LdapSettings.model_validate(settings["ldap"])
        return SssdServer(render(ldap, options=list(SSSD_TEST_OPTIONS)), negative_timeout=1).start()
    except SssdUnavailable as exc:
        say(f"(no sssd: {exc}; the LDAP entries are still there)")
        return None


def sup(*args: str, env: dict[str, str], check: bool = True) -> str:
    result = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "sup"), *args], env=env, capture_output=True, text=True
    )
    if check and result.returncode != 0:
        raise SystemExit(f"sup {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def wait_provisioned(url: str, token: str, timeout: float = 120) -> None:
    """Until this server's reconciler has run a pass and every active user is in_sync on every target
    (or fail, showing what is not). The first condition matters on a re-run: the store remembers that
    the users were in sync with the last (now gone) stack until a pass finds the new one empty."""
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + timeout
    pending = ["the reconciler's first pass"]
    while time.monotonic() < deadline:
        if httpx.get(f"{url}/readyz", timeout=10).json()["reconciler"].get("last_pass_at") is None:
            time.sleep(0.5)
            continue
        users = httpx.get(f"{url}/api/v1/users", headers=headers, params={"limit": 500}, timeout=10).json()
        pending = []
        for user in users["items"]:
            if not user["active"]:
                continue
            status = httpx.get(f"{url}/api/v1/users/{user['username']}/status", headers=headers, timeout=10)
            pending += [
                f"{user['username']}@{t['target']}: {t['state']}"
                for t in status.json()["targets"]
                if t["state"] != "in_sync"
            ]
        if not pending:
            return
        time.sleep(0.5)
    raise SystemExit("not provisioned in time: " + ", ".join(pending))


def show_targets(
    settings: dict[str, Any],
    sssd: SssdServer | None,
    slurmdbd: SlurmdbdServer,
    kubeapi: KubeApiServer,
    url: str,
    token: str,
) -> None:
    users = httpx.get(
        f"{url}/api/v1/users", headers={"Authorization": f"Bearer {token}"}, params={"limit": 500}, timeout=10
    ).json()["items"]
    say("\n== LDAP, as sssd on a node sees it (getent passwd) ==")
    for user in users:
        line = sssd.getent("passwd", user["username"]) if sssd else None
        state = "" if user["active"] else "   (suspended: login refused)"
        say(f"  {line or user['username'] + ': not resolvable'}{state}")
    say("\n== Slurm accounting (sacctmgr show associations) ==")
    for account, name in slurmdbd.show(
        "association", "where", f"cluster={slurmdbd.cluster}", "format=Account,User"
    ):
        if name and name != "root":
            say(f"  account={account:<10} user={name}")
    namespace = settings["kube"]["namespace"]
    say(f"\n== Kubernetes (namespace {namespace}) ==")
    with kubeapi.admin() as api:
        for kind in KINDS:
            names = sorted(
                o["metadata"]["name"]
                for o in api.items(collection(namespace, kind), "app.kubernetes.io/managed-by=sup")
            )
            if (
                not names
                and kind == "persistentvolumeclaims"
                and settings["kube"].get("home_mode") == "shared"
            ):
                claim = settings["kube"]["shared_home_claim"]
                names = [f"(none of SUP's: every home is a directory on the shared claim {claim})"]
            say(f"  {kind}: {', '.join(names)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="the demo directory (store, settings, token)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--once", action="store_true", help="provision, show, stop")
    args = parser.parse_args()
    directory: Path = args.dir.resolve()
    with running_stack(directory) as (settings, slurmdbd, kubeapi, node, jobs):
        config = directory / "sup.yaml"
        config.write_text(yaml.safe_dump(settings))
        config.chmod(0o600)  # it holds the LDAP bind password
        env = {k: v for k, v in os.environ.items() if not k.startswith("SUP_")}
        env.update(SUP_CONFIG=str(config), SLURM_CONF=str(slurmdbd.slurm_conf))
        sup("db", "upgrade", env=env)
        sup("token", "revoke", "demo-admin", env=env, check=False)  # a re-run replaces the last token
        token_file = directory / "admin-token"
        token_file.write_text(sup("token", "create", "--name", "demo-admin", "--role", "admin", env=env))
        token_file.chmod(0o600)
        sssd = jobs.sssd if jobs is not None else start_sssd(settings)
        gateway_token = ""
        if jobs is not None:
            sup("token", "revoke", "demo-gateway", env=env, check=False)
            gateway_token = sup(
                "token", "create", "--name", "demo-gateway", "--role", "gateway", env=env
            ).strip()
        homes = contextlib.ExitStack()
        if jobs is not None:
            homes.enter_context(demo_path.home_maker(SUP, env, settings, directory))
        url = f"http://127.0.0.1:{args.port}"
        log = (directory / "sup-serve.log").open("w")
        server = subprocess.Popen(
            [SUP, "serve", "--port", str(args.port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            subprocess.run(
                [
                    sys.executable,
                    str(ROOT / "scripts" / "seed_demo.py"),
                    "--url",
                    url,
                    "--token-file",
                    str(token_file),
                    str(ROOT / "examples" / "demo.json"),
                ],
                check=True,
            )
            say("SUP is provisioning the sample users into LDAP, Slurm and Kubernetes ...")
            started = time.monotonic()
            token = token_file.read_text().strip()
            wait_provisioned(url, token)
            say(f"every active user is in sync on every target ({time.monotonic() - started:.1f} s)")
            show_targets(settings, sssd, slurmdbd, kubeapi, url, token)
            if node is not None:
                ssh_into_login_pod(node, settings, url, token, directory)
            else:
                say("\n(no login pod runs without a Kubernetes node: see above why)")
            if node is not None and jobs is not None:
                namespace = settings["kube"]["namespace"]
                gateway = demo_path.start_gateway(node, namespace, url, gateway_token, directory)
                try:
                    demo_path.kim_runs_a_job(gateway, directory / "kim_ed25519", directory)
                finally:
                    gateway.stop()
            else:
                say(
                    "\n(no gateway, job or shared home is shown without a Kubernetes node and a Slurm"
                    " controller: see above why)"
                )
            until = " until this script stops" if args.once else ""
            say(
                f"\nSUP is running on {url} (OpenAPI: {url}/docs){until}; settings in {config},"
                f" an admin token in {token_file}, the log in {directory / 'sup-serve.log'}. Try:\n"
                f'  curl -s -H "Authorization: Bearer $(cat {token_file})" {url}/api/v1/users/kim/status\n'
                f"  SUP_CONFIG={config} .venv/bin/sup plan"
            )
            if not args.once:
                say("Ctrl-C stops SUP and the servers.")
                signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop cleanly on kill too
                with contextlib.suppress(KeyboardInterrupt):
                    server.wait()
        finally:
            server.terminate()
            server.wait(timeout=15)
            homes.close()
            if sssd is not None and jobs is None:
                sssd.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
