"""SUP's Helm chart, installed with `helm install` into the real test cluster (tests/support/kubenode.py),
runs SUP from its image and provisions a person who then logs in, and whose Slurm association SUP
writes into the test slurmdbd through the munge sidecar (`slurm.enabled`).

What an operator does, step by step: import SUP's image and the login image into the node (there is no
registry), give SUP a PostgreSQL database its pods reach (a server of the test's own, listening on the
node's address on the pod bridge as well as loopback, password logins from the pod network only), create
the release's namespace and the database-URL Secret, `helm install --wait` with values for this node,
take the first token the way the chart's NOTES say (`kubectl exec deploy/... -- sup token create`), and
add a person through the API. For Slurm, as docs/slurm.md says: a cluster of the test slurmdbd where
SUP's uid is a Slurm Operator, reached at the node's address on the pod bridge; the site's slurm.conf in
a ConfigMap and the munge key in a Secret of the release's namespace. Checked on the way: the migration
hook ran against that database before SUP started, SUP's pod is Ready (/readyz), its ServiceAccount
holds exactly the chart's Role (in the users' namespace; nothing in the release's), SUP reaches the API
server in-cluster through the `kubernetes` Service with the token and CA the controller-manager hands
out, the person's `ssh` into their login pod prints their name, and `helm uninstall` keeps the users'
namespace with the homes.
"""

from __future__ import annotations

import datetime
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import yaml

from sup.store.migrate import head_revision
from sup.targets.kube.names import USER_LABEL
from sup.targets.kube.names import key as object_key
from tests.e2e.login_site import SSH_FAILED, Person, Through, new_person, slurm_objects, slurm_pod_settings
from tests.e2e.researcher_path import (
    SharedHomes,
    delete_shared_home_volume,
    homes_on_the_compute_node,
    researcher_path,
    shared_home_volume,
)
from tests.support.chart_slurm import (
    SiteSlurm,
    create_slurm_objects,
    jobs_cluster_slurm,
    merge_values,
    slurm_values,
)
from tests.support.helm import CHART, helm
from tests.support.images import SUP_IMAGE, ImagesUnavailable, build_images
from tests.support.kubenode import KubeCluster
from tests.support.kubenode_config import KUBERNETES_SERVICE_IP
from tests.support.postgres import PostgresServer, PostgresUnavailable
from tests.support.relay import Relay
from tests.support.slurmctld import JobCluster
from tests.support.slurmdbd import SUP_UID, SlurmdbdServer

pytestmark = pytest.mark.timeout(1800)  # the first test may build the images

DATABASE = "sup"
ROLE = "sup"


@dataclass
class PodDatabase:
    """A database SUP's pods reach: `url` for the Secret (the node's address, a password),
    `server` for the test's own look (loopback, as the server's superuser)."""

    server: PostgresServer
    url: str


@pytest.fixture(scope="module")
def pod_database(kube_cluster: KubeCluster) -> Iterator[PodDatabase]:
    """A PostgreSQL of the test's own on loopback and on the node's address on the pod bridge (never
    the machine's external interfaces), accepting password logins from the pod network only."""
    try:
        server = PostgresServer(listen=[kube_cluster.pod_gateway], clients=kube_cluster.pod_cidr)
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))
    server.start()
    try:
        password = secrets.token_hex(16)
        server.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{password}'")
        server.execute(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
        url = f"postgresql+psycopg://{ROLE}:{password}@{kube_cluster.pod_gateway}:{server.port}/{DATABASE}"
        yield PodDatabase(server, url)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def sup_image(kube_cluster: KubeCluster, login_image: str) -> str:
    """SUP's image (scripts/build-images, cached) imported into the node, beside the login image."""
    try:
        images = build_images()
    except ImagesUnavailable as exc:
        pytest.skip(str(exc))
    started = time.monotonic()
    kube_cluster.import_image(images.sup)
    size = images.sup.stat().st_size / 2**20
    print(f"SUP's image ({size:.0f} MiB) imported into the node in {time.monotonic() - started:.1f} s")
    return SUP_IMAGE


@pytest.fixture(scope="module")
def chart_slurm(
    kube_cluster: KubeCluster, slurmdbd: SlurmdbdServer, slurm_jobs: JobCluster
) -> Iterator[SiteSlurm]:
    """The cluster of the session's slurmctld + slurmd in the test slurmdbd, for SUP's pods: reached
    at the node's address on the pod bridge (slurmdbd listens on every address), SUP's uid a Slurm
    Operator there, so that the people SUP provisions from the chart run jobs on it."""
    slurm_jobs.reset()
    with jobs_cluster_slurm(slurmdbd, slurm_jobs.cluster, kube_cluster.pod_gateway) as site:
        yield site
    slurm_jobs.reset()


@pytest.fixture
def ldap_relay(kube_cluster: KubeCluster, slurm_jobs: JobCluster) -> Iterator[Relay]:
    """The session's slapd (loopback only) reached from SUP's pods at the node's pod-bridge address."""
    relay = Relay(kube_cluster.pod_gateway, slurm_jobs.slapd.port)
    yield relay
    relay.stop()


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """The shared home filesystem's root on the host: a directory the people's jobs can walk into
    (pytest's temp dirs are root's alone)."""
    root = Path(tempfile.mkdtemp(prefix="sup-chart-homes-", dir="/var/tmp"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@dataclass
class Watch:
    """When things first appeared while `helm install` ran (seconds since it started), polled from
    a thread: the migration Job is deleted once it succeeds (its hook-delete-policy), so only a
    watcher sees it."""

    cluster: KubeCluster
    namespace: str
    name: str
    started: float = field(default_factory=time.monotonic)
    seen: dict[str, float] = field(default_factory=dict)
    job_succeeded: bool = False
    migration_seconds: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def _mark(self, what: str) -> None:
        self.seen.setdefault(what, time.monotonic() - self.started)

    def run(self) -> None:
        with self.cluster.apiserver.admin() as api:
            base = f"/namespaces/{self.namespace}"
            while not self._stop.is_set():
                job = api.get(f"/apis/batch/v1{base}/jobs/{self.name}-migrate")
                if job is not None:
                    self._mark("job created")
                    if job.get("status", {}).get("succeeded"):
                        self.job_succeeded = True
                        self._mark("job succeeded")
                if api.get(f"/apis/apps/v1{base}/deployments/{self.name}") is not None:
                    self._mark("deployment created")
                selector = f"app.kubernetes.io/instance={self.name}"
                for pod in api.items(f"/api/v1{base}/pods", selector):
                    conditions = pod.get("status", {}).get("conditions", [])
                    component = pod["metadata"]["labels"].get("app.kubernetes.io/component")
                    if component == "migration":
                        self._migration(pod)
                    elif any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                        self._mark("sup pod ready")
                time.sleep(0.2)

    def _migration(self, pod: dict[str, Any]) -> None:
        """`sup db upgrade`'s own run time, from the container's terminated state (whole seconds)."""
        for status in pod.get("status", {}).get("containerStatuses", []):
            done = status.get("state", {}).get("terminated")
            if done and done.get("exitCode") == 0:
                self.job_succeeded = True
                started, finished = (
                    datetime.datetime.fromisoformat(done[k]) for k in ("startedAt", "finishedAt")
                )
                self.migration_seconds = (finished - started).total_seconds()
                self._mark("migration container finished")

    def __enter__(self) -> Watch:
        self._thread = threading.Thread(target=self.run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def values(kube_cluster: KubeCluster, login_image: str) -> dict[str, Any]:
    return {
        "image": {
            "repository": SUP_IMAGE.split(":")[0],
            "tag": SUP_IMAGE.split(":")[1],
            "pullPolicy": "Never",
        },
        "replicaCount": 1,
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        # only the kube target; a short debounce so that a write is provisioned at once
        "config": {"reconcile": {"interval_seconds": 300, "debounce_seconds": 0.2, "poll_seconds": 0.2}},
        "kube": {"settings": kube_cluster.login_settings(login_image)},
    }


def can_i(kube_cluster: KubeCluster, account: str, verb: str, resource: str, namespace: str) -> bool:
    """`kubectl auth can-i` as SUP's ServiceAccount: what the API server's RBAC allows it."""
    result = kube_cluster.kubectl(
        "auth", "can-i", verb, resource, "-n", namespace, f"--as={account}", check=False
    )
    answer = result.stdout.strip()
    assert answer in ("yes", "no"), (result.returncode, result.stdout, result.stderr)
    return answer == "yes"


SELF_REVIEWS = {  # what every authenticated client may do (system:basic-user)
    "selfsubjectaccessreviews.authorization.k8s.io",
    "selfsubjectrulesreviews.authorization.k8s.io",
    "selfsubjectreviews.authentication.k8s.io",
}


def granted(kube_cluster: KubeCluster, account: str, namespace: str) -> set[tuple[str, str]]:
    """(verb, resource.group) pairs `kubectl auth can-i --list` shows for the account in the namespace,
    without the self-reviews every client has and non-resource URLs."""
    listed = kube_cluster.kubectl("auth", "can-i", "--list", "-n", namespace, f"--as={account}").stdout
    pairs: set[tuple[str, str]] = set()
    for line in listed.splitlines()[1:]:
        match = re.fullmatch(r"(\S+)\s+\[\]\s+\[.*?\]\s+\[(.*)\]", line.strip())
        if match and match[1] not in SELF_REVIEWS:
            pairs |= {(verb, match[1]) for verb in match[2].split()}
    return pairs


def role_rules(role: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (verb, f"{resource}.{group}" if group else resource)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def ssh(
    person: Person, address: tuple[str, int], command: str, directory: Path
) -> subprocess.CompletedProcess[str]:
    host, port = address
    argv = [
        "ssh",
        "-p", str(port),
        "-i", str(person.key),
        "-o", "IdentitiesOnly=yes",
        "-o", "BatchMode=yes",
        "-o", "ConnectTimeout=10",
        "-o", f"UserKnownHostsFile={directory / 'known_hosts'}",
        "-o", "StrictHostKeyChecking=accept-new",
        "-o", "LogLevel=ERROR",
        f"{person.name}@{host}",
        command,
    ]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def wait(condition: Callable[[], Any], what: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = condition()
        except (httpx.HTTPError, OSError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.3)
    raise AssertionError(f"{what} not reached within {timeout} s (last: {last!r})")


def diagnose(kube_cluster: KubeCluster, namespace: str) -> str:
    """What a failed install left: pods, jobs, events and SUP's logs, for the assertion message."""
    shown = [
        kube_cluster.kubectl(
            "-n", namespace, "get", "pods,jobs,deployments", "-o", "wide", check=False
        ).stdout,
        kube_cluster.kubectl("-n", namespace, "get", "events", check=False).stdout[-3000:],
    ]
    for pod in kube_cluster.api.items(f"/api/v1/namespaces/{namespace}/pods"):
        name = pod["metadata"]["name"]
        logs = kube_cluster.kubectl("-n", namespace, "logs", name, "--all-containers", check=False)
        shown.append(f"--- {name}:\n{(logs.stdout + logs.stderr)[-2000:]}")
    return "\n".join(shown)


CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
except OSError:
    print("refused")
else:
    print("connected")
"""


@dataclass
class InstalledGateway:
    node_port: int
    exec: Callable[..., str]  # a command in one of the gateway's pods, its stdout


def gateway_on(
    kube_cluster: KubeCluster,
    helm_binary: str,
    release: str,
    namespace: str,
    values_file: Path,
    in_sup_pod: Callable[..., str],
    directory: Path,
) -> InstalledGateway:
    """What the chart's values.yaml says an operator does to turn the gateway on: its host key made
    once into a Secret, a token of role `gateway` from SUP into another, `helm upgrade` with
    gateway.enabled. The gateway finds login pods by their Services' DNS names (the test cluster's
    CoreDNS)."""
    key = directory / "gateway_host_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sup-gateway", "-f", str(key)], check=True
    )
    token = in_sup_pod("sup", "token", "create", "--name", "gateway", "--role", "gateway").strip()
    for name, data in (("sup-gateway-host-key", {"ssh_host_ed25519_key": key.read_text()}),
                       ("sup-gateway-token", {"token": token})):  # fmt: skip
        kube_cluster.api.create(
            f"/api/v1/namespaces/{namespace}/secrets", {"metadata": {"name": name}, "stringData": data}
        )
    key.unlink()
    settings = yaml.safe_load(values_file.read_text())
    settings["gateway"] = {
        "enabled": True,
        "replicaCount": 1,
        "settings": {"workers": 1},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    }
    values_file.write_text(yaml.safe_dump(settings))
    kubeconfig = ["--kubeconfig", str(kube_cluster.kubeconfig)]
    result = helm(
        helm_binary, "upgrade", release, str(CHART), "--namespace", namespace, *kubeconfig,
        "--values", str(values_file), "--wait", "--timeout", "300s", timeout=330,
    )  # fmt: skip
    assert result.returncode == 0, f"{result.stdout}{result.stderr}\n{diagnose(kube_cluster, namespace)}"
    name = f"{release}-gateway"
    service = kube_cluster.api.get(f"/api/v1/namespaces/{namespace}/services/{name}")
    assert service is not None and service["spec"]["type"] == "NodePort"

    def exec_in_gateway(*argv: str) -> str:
        return kube_cluster.kubectl("-n", namespace, "exec", f"deploy/{name}", "--", *argv).stdout

    return InstalledGateway(int(service["spec"]["ports"][0]["nodePort"]), exec_in_gateway)


LDAP_SECRET = "sup-ldap"
SHARED_CLAIM = "homes"


def site_values(
    kube_cluster: KubeCluster, login_image: str, site: SiteSlurm, jobs: JobCluster, relay: Relay
) -> dict[str, Any]:
    """values() with every target, as docs/install.md sets them: LDAP (the session's slapd, which
    SUP's pods reach through a relay; the bind password from a Secret), Slurm (the session's job
    cluster), and Kubernetes with homes on the shared filesystem and Slurm's client in the login pods."""
    chart = merge_values(values(kube_cluster, login_image), slurm_values(site.cluster))
    ldap = {key: value for key, value in jobs.ldap.items() if key != "bind_password"}
    chart["config"]["ldap"] = {**ldap, "url": f"ldap://{relay.address}"}
    chart["secrets"] = {"ldapBindPassword": {"name": LDAP_SECRET, "key": "bind_password"}}
    chart["kube"]["settings"].update(
        slurm_pod_settings(kube_cluster, jobs.controller),
        home_mode="shared",
        shared_home_claim=SHARED_CLAIM,
        home_root="/home",
    )
    return chart


class UsersNamespace(threading.Thread):
    """What docs/install.md has the operator put into the users' namespace once the chart has made it
    (while `helm install --wait` waits for the home maker, which needs the claim): the login pods'
    slurm.conf and munge key, and the site's shared home claim."""

    def __init__(self, cluster: KubeCluster, users: str, jobs: JobCluster, root: Path) -> None:
        super().__init__(daemon=True)
        self.cluster, self.users, self.jobs, self.root = cluster, users, jobs, root
        self.homes: SharedHomes | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.cluster.wait_for(
                lambda: self.cluster.api.get(f"/api/v1/namespaces/{self.users}"), "the users' namespace", 300
            )
            controller = self.jobs.controller
            slurm_objects(
                self.cluster,
                self.users,
                controller.client_conf(self.cluster.pod_gateway),
                controller.munge_key,
            )
            self.homes = shared_home_volume(self.cluster, self.users, self.root, SHARED_CLAIM)
        except BaseException as exc:  # reported by the test
            self.error = exc


def lab_account(sup_url: str, in_sup_pod: Callable[..., str], name: str) -> None:
    """A group and the Slurm account bound to it, through the API with an admin token (Slurm
    accounts are an admin's), the token taken as the chart's NOTES say."""
    token = in_sup_pod("sup", "token", "create", "--name", "slurm-admin", "--role", "admin").strip()
    headers = {"Authorization": f"Bearer {token}"}
    for path, body in (("groups", {"name": name}), ("slurm/accounts", {"name": name, "group": name})):
        response = httpx.post(f"{sup_url}/api/v1/{path}", json=body, headers=headers, timeout=30)
        assert response.status_code == 201, response.text


def assert_slurm_from_the_chart(
    kube_cluster: KubeCluster,
    namespace: str,
    release: str,
    site: SiteSlurm,
    sup_url: str,
    in_sup_pod: Callable[..., str],
) -> None:
    """SUP, installed from the chart with slurm.enabled, wrote alice's association in the `lab`
    account into slurmdbd (as `sacctmgr show` on the host sees it) through the munge sidecar, as its
    own uid; SUP's container holds no munge key; munged runs as the munge uid."""
    started = time.monotonic()
    try:
        wait(lambda: ("lab", "alice") in site.associations(), "alice's association in slurmdbd", 60)
    except AssertionError as exc:
        reconciler = httpx.get(f"{sup_url}/readyz", timeout=5).json()["reconciler"]
        raise AssertionError(
            f"{exc}; SUP's reconciler: {reconciler}\n{diagnose(kube_cluster, namespace)}"
        ) from None
    print(
        f"alice's association on {site.cluster} in slurmdbd {time.monotonic() - started:.1f} s after her pod"
    )
    # in her group's account, and nobody else is
    assert {user for account, user in site.associations() if account == "lab"} == {"alice"}
    readyz = httpx.get(f"{sup_url}/readyz", timeout=5).json()
    assert readyz["reconciler"]["targets"]["slurm"]["error"] is None, readyz
    # from SUP's container: the site's slurm.conf, a credential for SUP's own uid, no key anywhere
    assert in_sup_pod("printenv", "SLURM_CONF").strip() == "/etc/slurm/slurm.conf"
    credential = in_sup_pod("sh", "-c", "munge -n | unmunge")
    assert ["UID:", "sup", f"({SUP_UID})"] in [line.split() for line in credential.splitlines()], credential
    shown = in_sup_pod("sacctmgr", "-n", "-P", "show", "user", "sup-service", "format=User,AdminLevel")
    assert shown.split() == ["sup-service|Operator"]
    looked = in_sup_pod("sh", "-c", "ls /etc/munge-key /var/lib/munge 2>&1; true")
    assert "munge.key" not in looked and "No such file" in looked
    munge = ["-n", namespace, "exec", f"deploy/{release}", "-c", "munge", "--"]
    assert kube_cluster.kubectl(*munge, "id", "-u").stdout.strip() == "994"
    assert kube_cluster.kubectl(*munge, "ls", "/var/lib/munge").stdout.split().count("munge.key") == 1


def migrated_revision(database: PodDatabase) -> str | None:
    """The database's Alembic revision; None before any migration."""
    with psycopg.connect(database.server.url(DATABASE).replace("+psycopg", "")) as connection:
        if connection.execute("SELECT to_regclass('public.alembic_version')").fetchone() == (None,):
            return None
        row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    return str(row[0]) if row else None


def test_the_chart_installed_with_helm_runs_sup_which_provisions_a_person_who_logs_in(
    kube_cluster: KubeCluster,
    helm_binary: str,
    sup_image: str,
    login_image: str,
    pod_database: PodDatabase,
    chart_slurm: SiteSlurm,
    slurm_jobs: JobCluster,
    ldap_relay: Relay,
    shared_root: Path,
    tmp_path: Path,
) -> None:
    release = f"sup-{uuid.uuid4().hex[:6]}"  # the chart's full name too (it contains "sup")
    namespace = kube_cluster.new_namespace("sup-system", pod_security="restricted")
    users = f"{release}-users"  # the chart's default target namespace
    account = f"system:serviceaccount:{namespace}:{release}"
    kube_cluster.api.create(
        f"/api/v1/namespaces/{namespace}/secrets",
        {"metadata": {"name": "sup-database"}, "stringData": {"url": pod_database.url}},
    )
    create_slurm_objects(kube_cluster.api, namespace, chart_slurm.slurm_conf, chart_slurm.munge_key)
    kube_cluster.api.create(
        f"/api/v1/namespaces/{namespace}/secrets",
        {
            "metadata": {"name": LDAP_SECRET},
            "stringData": {"bind_password": slurm_jobs.ldap["bind_password"]},
        },
    )
    values_file = tmp_path / "values.yaml"
    values_file.write_text(
        yaml.safe_dump(site_values(kube_cluster, login_image, chart_slurm, slurm_jobs, ldap_relay))
    )
    prepared = UsersNamespace(kube_cluster, users, slurm_jobs, shared_root)
    kubeconfig = ["--kubeconfig", str(kube_cluster.kubeconfig)]
    assert migrated_revision(pod_database) is None  # an empty database: the hook migrates it
    installed = False
    try:
        # --- helm install: the migration hook, then SUP's objects; --wait for the pod to be Ready
        with Watch(kube_cluster, namespace, release) as watch:
            prepared.start()
            result = helm(
                helm_binary, "install", release, str(CHART), "--namespace", namespace, *kubeconfig,
                "--values", str(values_file), "--wait", "--timeout", "300s", timeout=330,
            )  # fmt: skip
            installed = result.returncode == 0
            install_seconds = time.monotonic() - watch.started
            wait(lambda: "sup pod ready" in watch.seen, "the watcher to see SUP's pod Ready", 10)
        prepared.join(timeout=60)
        assert prepared.error is None and prepared.homes is not None, prepared.error
        homes = prepared.homes
        assert result.returncode == 0, f"{result.stdout}{result.stderr}\n{diagnose(kube_cluster, namespace)}"
        seen = {what: f"{seconds:.1f} s" for what, seconds in watch.seen.items()}
        print(f"helm install --wait: {install_seconds:.1f} s; since it started: {seen}")
        # the hook ran `sup db upgrade` against the database before SUP's Deployment existed, and
        # was deleted once it succeeded (its hook-delete-policy)
        assert watch.seen["job created"] < watch.seen["deployment created"]
        assert watch.job_succeeded and watch.migration_seconds is not None
        print(f"`sup db upgrade` in the migration Job's container: {watch.migration_seconds:.0f} s")
        assert migrated_revision(pod_database) == head_revision()
        assert kube_cluster.api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{release}-migrate") is None

        # --- SUP's pod: Ready from its image, and /readyz through the Service from the host
        (pod,) = kube_cluster.api.items(
            f"/api/v1/namespaces/{namespace}/pods", f"app.kubernetes.io/instance={release}"
        )
        assert pod["spec"]["containers"][0]["image"] == sup_image
        assert pod["spec"]["serviceAccountName"] == release
        service = kube_cluster.api.get(f"/api/v1/namespaces/{namespace}/services/{release}")
        assert service is not None
        sup_url = f"http://{service['spec']['clusterIP']}:8080"
        readyz = wait(
            lambda: (r := httpx.get(f"{sup_url}/readyz", timeout=5)).status_code == 200 and r.json(),
            "SUP's /readyz through its Service",
            30,
        )
        assert readyz["database"]["state"] == "ok" and readyz["targets"]["kube"] == "configured"
        assert readyz["targets"]["slurm"] == "configured" and readyz["targets"]["ldap"] == "configured"

        # --- RBAC: exactly the chart's Role, in the users' namespace only
        role = kube_cluster.api.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{users}/roles/{release}")
        assert role is not None and ("create", "statefulsets.apps") in role_rules(role)
        assert granted(kube_cluster, account, users) == role_rules(role)
        assert granted(kube_cluster, account, namespace) == set()
        assert can_i(kube_cluster, account, "create", "statefulsets.apps", users)
        assert can_i(kube_cluster, account, "patch", "persistentvolumeclaims", users)
        assert can_i(kube_cluster, account, "delete", "pods", users)
        assert can_i(kube_cluster, account, "list", "networkpolicies.networking.k8s.io", users)
        assert not can_i(kube_cluster, account, "get", "secrets", users)
        assert not can_i(kube_cluster, account, "create", "pods", users)
        assert can_i(kube_cluster, account, "watch", "statefulsets.apps", users)  # the watch cache
        assert not can_i(kube_cluster, account, "watch", "pods", users)
        assert not can_i(kube_cluster, account, "patch", "namespaces", users)  # its Pod Security labels
        for verb, resource in [("get", "secrets"), ("list", "configmaps"), ("create", "statefulsets.apps"),
                               ("create", "pods")]:  # fmt: skip
            assert not can_i(kube_cluster, account, verb, resource, namespace), (verb, resource)
        assert not can_i(kube_cluster, account, "list", "statefulsets.apps", "default")

        def in_pod(*argv: str) -> str:
            return kube_cluster.kubectl("-n", namespace, "exec", f"deploy/{release}", "--", *argv).stdout

        # --- the first token, as the chart's NOTES say; then a person with a key, through the API
        notes = helm(helm_binary, "get", "notes", release, "--namespace", namespace, *kubeconfig).stdout
        assert f"exec deploy/{release} -- sup token create --name ops --role operator" in notes
        assert "as uid 10001 (munge, in the `munge` sidecar)" in notes  # slurm.enabled: SUP's Slurm identity
        token = in_pod("sup", "token", "create", "--name", "ops", "--role", "operator").strip()
        assert token and "\n" not in token
        headers = {"Authorization": f"Bearer {token}"}
        lab_account(sup_url, in_pod, "lab")
        alice = new_person(tmp_path, "alice")
        started = time.monotonic()
        response = httpx.post(
            f"{sup_url}/api/v1/users",
            json={"username": "alice", "ssh_public_keys": [alice.public], "groups": ["lab"]},
            headers=headers,
            timeout=30,
        )
        assert response.status_code == 201, response.text
        try:
            wait(
                lambda: kube_cluster.api.get(f"/api/v1/namespaces/{users}/pods/login-alice-0"),
                "alice's login pod",
                120,
            )
        except AssertionError as exc:  # what SUP's reconciler says about the target
            reconciler = httpx.get(f"{sup_url}/readyz", timeout=5).json()["reconciler"]
            raise AssertionError(f"{exc}; SUP's reconciler: {reconciler}") from None
        created_seconds = time.monotonic() - started
        kube_cluster.wait_pod_ready(users, "login-alice-0", timeout=120)
        ready_seconds = time.monotonic() - started
        login_service = kube_cluster.api.get(f"/api/v1/namespaces/{users}/services/login-alice")
        assert login_service is not None and login_service["spec"]["clusterIP"] == "None"  # headless
        # its name gives the pod's own address once it is ready (as a pod's resolver would ask), and
        # a client connects to sshd's port there, the Service's targetPort
        addresses = wait(
            lambda: kube_cluster.resolve(f"login-alice.{users}.svc"), "alice's login pod's address", 60
        )
        host = (addresses[0], int(login_service["spec"]["ports"][0]["targetPort"]))
        attempts: list[str] = []

        def login() -> str | None:
            result = ssh(alice, host, "id -un", tmp_path)
            if result.returncode != 0:
                attempts.append(f"{time.monotonic() - started:.1f} s: {result.stderr.strip()[-120:]}")
                return None
            return result.stdout

        printed = wait(login, "alice's ssh into her login pod", 60)
        print("failed ssh attempts:", attempts)
        assert printed.strip() == "alice"
        print(
            f"POST /users to the login pod created: {created_seconds:.1f} s, Ready: {ready_seconds:.1f} s; "
            f"to `ssh ... id -un` printing alice: {time.monotonic() - started:.1f} s"
        )
        # SUP reached the API server in-cluster (the `kubernetes` Service, the ServiceAccount's
        # token and the controller-manager's CA): its last pass on the target applied cleanly
        readyz = httpx.get(f"{sup_url}/readyz", timeout=5).json()
        assert readyz["reconciler"]["targets"]["kube"]["error"] is None, readyz
        assert in_pod("printenv", "KUBERNETES_SERVICE_HOST").strip() == KUBERNETES_SERVICE_IP
        mounted_ca = in_pod("cat", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
        assert mounted_ca == kube_cluster.apiserver.ca_file.read_text()  # the controller-manager's root CA
        logs = kube_cluster.kubectl("-n", namespace, "logs", f"deploy/{release}").stdout
        assert "cannot reach the API server" not in logs and "CERTIFICATE_VERIFY_FAILED" not in logs
        # her home: her directory of the site's shared volume, made by the chart's home maker (no
        # claim of her own), and she is in the directory the nodes read (LDAP through sssd)
        claims = kube_cluster.api.items(
            f"/api/v1/namespaces/{users}/persistentvolumeclaims", f"{USER_LABEL}={object_key('alice')}"
        )
        assert claims == []
        passwd = slurm_jobs.sssd.getent("passwd", "alice")
        assert passwd is not None and passwd.split(":")[5] == "/home/alice", passwd
        uid = int(passwd.split(":")[2])
        home = homes.root / "alice"
        made = wait(lambda: home.is_dir() and home.stat(), "alice's directory made by the home maker", 60)
        assert (made.st_uid, made.st_mode & 0o777) == (uid, 0o700)
        assert ssh(alice, host, "echo $HOME; ls -A /home", tmp_path).stdout.split() == [
            "/home/alice",
            "alice",
        ]
        assert_slurm_from_the_chart(kube_cluster, namespace, release, chart_slurm, sup_url, in_pod)

        # --- the SSH gateway, turned on later by `helm upgrade` as docs/ssh-gateway.md says: its host
        # key and a `gateway` token in Secrets first, then one address for every login pod
        gateway = gateway_on(kube_cluster, helm_binary, release, namespace, values_file, in_pod, tmp_path)
        through = Through(tmp_path, alice, gateway.node_port, kube_cluster.node_ip)

        def landed() -> str | None:
            result = through.ssh("alice", "id -un; hostname")
            return result.stdout if result.returncode == 0 else None

        started = time.monotonic()
        printed = wait(landed, "alice's ssh -J through the gateway's NodePort", 90)
        print(f"after helm upgrade with the gateway: ssh -J landed in {time.monotonic() - started:.1f} s")
        assert printed.split() == [
            "alice",
            "login-alice-0",
        ]
        stranger = new_person(tmp_path, "alice", "-other")  # alice's name, a key SUP does not know
        refused = Through(tmp_path, stranger, gateway.node_port, kube_cluster.node_ip).ssh("alice", "id")
        assert refused.returncode == SSH_FAILED and "Permission denied" in refused.stderr
        # who is connected, as SUP's API shows it while a session is held through the gateway
        held = through.hold("alice")
        try:
            sessions = wait(
                lambda: httpx.get(f"{sup_url}/api/v1/gateway/sessions", headers=headers, timeout=5).json(),
                "alice's session in SUP's sessions list",
                60,
            )
            assert [(s["kind"], s["name"], s["username"]) for s in sessions] == [("user", "alice", "alice")]
        finally:
            held.kill()
            held.wait()
        # the NetworkPolicies kube-router enforces: the chart's admits the gateway's pods to sshd,
        # SUP's own pod (not a gateway, not in ssh_sources) stays out
        login_ip, ssh_port = host[0], str(host[1])
        assert gateway.exec("python", "-c", CONNECT, login_ip, ssh_port).strip() == "connected"
        assert in_pod("python", "-c", CONNECT, login_ip, ssh_port).strip() == "refused"
        # and the gateway's own (gateway.networkPolicy): out to SUP, the login pods and DNS only (it
        # just used all three), not to the Kubernetes API or SUP's database, which SUP's pod reaches
        database = (kube_cluster.pod_gateway, str(pod_database.server.port))
        assert in_pod("python", "-c", CONNECT, *database).strip() == "connected"
        assert gateway.exec("python", "-c", CONNECT, *database).strip() == "refused"
        assert gateway.exec("python", "-c", CONNECT, KUBERNETES_SERVICE_IP, "443").strip() == "refused"

        # --- `helm test`: SUP ready, every enabled target reachable, the gateway answering SSH
        tested = helm(
            helm_binary, "test", release, "--namespace", namespace, *kubeconfig, "--logs",
            "--timeout", "180s", timeout=200,
        )  # fmt: skip
        assert tested.returncode == 0, tested.stdout + tested.stderr
        for line in ("helm test: passed", "target kube: reachable", "target ldap: reachable",
                     "target slurm: reachable", "accepts TCP (SSH-"):  # fmt: skip
            assert line in tested.stdout, tested.stdout

        # --- a lab member's whole path (tests/e2e/researcher_path.py): pushed over SCIM, in through the
        # gateway, a job from their shared home on the node's slurmd, its output back in their home;
        # then suspended: the session cut, new jobs refused
        admin_token = in_pod("sup", "token", "create", "--name", "path-admin", "--role", "admin").strip()
        admin = {"Authorization": f"Bearer {admin_token}"}
        scim_token = in_pod("sup", "token", "create", "--name", "idp", "--role", "scim").strip()
        with homes_on_the_compute_node(slurm_jobs, homes):
            seconds = researcher_path(
                cluster=kube_cluster,
                jobs=slurm_jobs,
                homes=homes,
                users_namespace=users,
                sup_url=sup_url,
                admin=admin,
                scim_token=scim_token,
                gateway_port=gateway.node_port,
                directory=tmp_path,
            )
        print(
            f"SCIM push to ssh -J landed {seconds.landed:.1f} s, to the job's output read in the home "
            f"{seconds.output:.1f} s; suspension to the session cut {seconds.cut:.1f} s, to a new job "
            f"refused {seconds.refused:.1f} s"
        )

        # --- helm upgrade that changes SUP's pod but not what SUP renders: SUP restarts, its first pass
        # after it restarts no login pod (their templates did not change) and keeps every home
        alice_pod = kube_cluster.api.get(f"/api/v1/namespaces/{users}/pods/login-alice-0")
        assert alice_pod is not None
        result = helm(
            helm_binary, "upgrade", release, str(CHART), "--namespace", namespace, *kubeconfig,
            "--reuse-values", "--set", "podAnnotations.upgraded=again", "--wait", "--timeout", "300s",
            timeout=330,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        (pod,) = [
            p
            for p in kube_cluster.api.items(
                f"/api/v1/namespaces/{namespace}/pods",
                f"app.kubernetes.io/name=sup,app.kubernetes.io/instance={release}",
            )
            if p["metadata"].get("deletionTimestamp") is None
        ]
        assert pod["metadata"]["annotations"].get("upgraded") == "again"  # SUP's pod is a new one
        wait(
            lambda: httpx.get(f"{sup_url}/readyz", timeout=5).json()["reconciler"].get("last_pass_at"),
            "a pass of the upgraded SUP",
            120,
        )
        after = kube_cluster.api.get(f"/api/v1/namespaces/{users}/pods/login-alice-0")
        assert after is not None and after["metadata"]["uid"] == alice_pod["metadata"]["uid"]
        assert home.stat().st_uid == uid

        # --- helm uninstall: SUP and its rights go, the users' namespace and the home stay
        result = helm(helm_binary, "uninstall", release, "--namespace", namespace, *kubeconfig, "--wait")
        assert result.returncode == 0, result.stderr
        installed = False
        assert kube_cluster.api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{release}") is None
        assert not can_i(kube_cluster, account, "create", "statefulsets.apps", users)
        kept = kube_cluster.api.get(f"/api/v1/namespaces/{users}")
        assert kept is not None and kept["status"]["phase"] == "Active"
        claim = kube_cluster.api.get(f"/api/v1/namespaces/{users}/persistentvolumeclaims/{SHARED_CLAIM}")
        assert claim is not None and claim["status"]["phase"] == "Bound"
        assert home.stat().st_uid == uid and (homes.root / "ada").is_dir()
        shown = kube_cluster.kubectl("get", "namespace", users, "-o", "name").stdout.strip()
        print(f"after helm uninstall: {shown} kept, with the shared claim and the homes in it")
    finally:
        if installed:
            helm(helm_binary, "uninstall", release, "--namespace", namespace, *kubeconfig)
        for name in (users, namespace):
            kube_cluster.api.delete(f"/api/v1/namespaces/{name}")
        if prepared.homes is not None:
            delete_shared_home_volume(kube_cluster, users, prepared.homes)
