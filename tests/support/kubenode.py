"""A real single-node Kubernetes for the tests: pods run.

etcd + kube-apiserver (tests/support/kubeapi.py, with the flags a cluster with nodes needs),
kube-controller-manager, kube-scheduler, containerd + runc, the kubelet, a CNI bridge, kube-proxy
(iptables), kube-router (NetworkPolicy only) and CoreDNS (the cluster's DNS). What each daemon is
told is data in tests/support/kubenode_config.py; this module is the lifecycle (`start` as a sequence
of steps, `stop`, the lock, `recover`). What runs, how it is built and what it needs from the host:
docs/development.md, "The test node". The binaries and the pause image are built once by
scripts/build-kube-node into ${SUP_CACHE_DIR:-~/.cache/sup} (scripts/setup --servers runs it).

The node's address is the host's address on the pod bridge (`node_ip` == `pod_gateway`): the fixture
makes the bridge itself before the kubelet starts, so pods reach whatever listens on the host's
0.0.0.0 (slurmctld, PostgreSQL) at `pod_gateway`, and nothing of the cluster listens on the host's
external interfaces except kube-apiserver (0.0.0.0, so pods reach it through the `kubernetes`
Service). CoreDNS listens on the node's address, port 53, and the kubelet gives pods that address:
in a pod `login-KEY.NAMESPACE.svc` resolves as in any cluster; the host itself (the tests) does not
use it, so tests ask it (`resolve`) for the address a name has in a pod.

Host-wide state (iptables chains, ipsets, sysctls, cgroups, the bridge, netns, mounts) can only
belong to one cluster at a time: a lock file makes a second cluster on the machine wait for the first.
`stop()` deletes the pods (so the CNI plugin releases their network), stops every process by pid,
runs kube-proxy's and kube-router's own cleanup, then removes what is left (tests/support/hoststate.py)
and the temp dir.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import dns.resolver
import httpx

from tests.support import hoststate
from tests.support.kubeapi import Admin, ApiError, KubeApiServer, KubeApiUnavailable
from tests.support.kubenode_config import (
    APISERVER_DNS,
    BRIDGE,
    CLUSTER_DOMAIN,
    CNI_BIN_DIR,
    KUBELET_CLIENT_SUBJECT,
    KUBERNETES_SERVICE_IP,
    NODE_NAME,
    SERVICE_CIDR,
    NodeConfig,
    apiserver_flags,
    component_subjects,
)
from tests.support.localpv import LocalProvisioner, storage_class
from tests.support.ports import free_port
from tests.support.processes import stop_process

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build-kube-node"
STORAGE_CLASS = "sup-local"
LOCK_FILE = Path(tempfile.gettempdir()) / "sup-kube-cluster.lock"
SNAPSHOT = "host-snapshot.json"  # in the cluster's root: what to put back after a crash


class KubeClusterUnavailable(RuntimeError):
    pass


def node_binaries() -> dict[str, Path]:
    """kubelet, kube-controller-manager, kube-scheduler, kube-proxy, kubectl, kube-router, coredns
    and pause.oci.tar, as cached by scripts/build-kube-node (which takes minutes, so fixtures do not)."""
    result = subprocess.run(
        [str(BUILD_SCRIPT), "--cached-only"], capture_output=True, text=True, timeout=60, check=False
    )
    if result.returncode != 0:
        raise KubeClusterUnavailable(
            "the Kubernetes node binaries are not built yet: run scripts/build-kube-node"
            " (scripts/setup --servers and scripts/test do)"
        )
    paths = [Path(line) for line in result.stdout.split()]
    return {path.name: path for path in paths}


def _missing_host_tools() -> list[str]:
    tools = ["containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ipset", "ip"]
    missing = [
        tool
        for tool in tools
        if not any(Path(d, tool).exists() for d in ("/usr/bin", "/usr/sbin", "/bin", "/sbin"))
    ]
    missing += [
        f"{CNI_BIN_DIR}/{p}"
        for p in ("bridge", "host-local", "portmap", "loopback")
        if not Path(CNI_BIN_DIR, p).exists()
    ]
    return missing


def _host_nameservers() -> list[str]:
    """The host's resolvers, from /etc/resolv.conf (none: CoreDNS answers cluster names only)."""
    try:
        lines = Path("/etc/resolv.conf").read_text().splitlines()
    except OSError:
        return []
    return [line.split()[1] for line in lines if line.startswith("nameserver") and len(line.split()) > 1]


def _free_subnet() -> ipaddress.IPv4Network:
    """The first 10.244.N.0/24 that no route on the host covers."""
    routes = subprocess.run(
        ["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True, check=False
    ).stdout
    used = []
    for line in routes.splitlines():
        with contextlib.suppress(ValueError):
            first = line.split()[0] if not line.startswith(("local", "broadcast")) else line.split()[1]
            used.append(ipaddress.ip_network(first, strict=False))
    for third in range(256):
        subnet = ipaddress.IPv4Network(f"10.244.{third}.0/24")
        if not any(subnet.overlaps(net) for net in used if net.prefixlen > 0):
            return subnet
    raise KubeClusterUnavailable("no free 10.244.N.0/24 for the pod network")


class _ClusterApiServer(KubeApiServer):
    """kube-apiserver as a cluster with a node needs it: Node authorization, ServiceAccount
    admission, kubelet client certificates, reachable from pods at the node's address."""

    def __init__(self, root: Path, node_ip: str) -> None:
        self.node_ip = node_ip
        self.server_ips = ("127.0.0.1", node_ip, KUBERNETES_SERVICE_IP)
        self.server_dns = APISERVER_DNS
        super().__init__(root)

    def apiserver_flags(self) -> list[str]:
        return apiserver_flags(super().apiserver_flags(), node_ip=self.node_ip, root=self.root)

    def _certificates(self) -> None:
        super()._certificates()
        assert self.ca is not None
        cert, key = self.ca.issue(KUBELET_CLIENT_SUBJECT, server=False)
        self._write("kubelet-client.pem", cert)
        self._write("kubelet-client.key", key)


class KubeCluster:
    """One node; `start()` returns when the node is Ready, NetworkPolicy is enforced and the
    StorageClass exists. Attributes for tests: kubeconfig (admin), node_ip, pod_gateway,
    storage_class, api (an `Admin` client), pod_cidr, service_cidr, node_name."""

    def __init__(self, *, sync_frequency: str = "10s", lock_wait: float = 240) -> None:
        self.binaries = node_binaries()
        missing = _missing_host_tools()
        if missing:
            raise KubeClusterUnavailable(
                f"missing on this host: {', '.join(missing)} (scripts/setup --servers installs them)"
            )
        if os.geteuid() != 0:
            raise KubeClusterUnavailable("a real Kubernetes node needs root")
        # The kubelet resyncs each pod (and so its mounted ConfigMaps and Secrets) every
        # syncFrequency (+ up to 1x jitter): 10 s instead of the default 1 min makes an updated
        # ConfigMap (login keys, NSS maps) reach running pods within ~20 s.
        self.sync_frequency = sync_frequency
        # another test run's cluster holds the machine: wait for it, but less than pytest's timeout
        self.lock_wait = lock_wait
        self.node_name = NODE_NAME
        self.storage_class = STORAGE_CLASS
        self.service_cidr = SERVICE_CIDR
        self.root = Path(tempfile.mkdtemp(prefix="sup-kubenode-"))
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []
        self._lock: IO[str] | None = None
        self._locked = False
        self._snapshot: hoststate.HostSnapshot | None = None
        self._apiserver: _ClusterApiServer | None = None
        self._provisioner: LocalProvisioner | None = None
        self._api: Admin | None = None
        self._config: NodeConfig | None = None  # once the node's address is known (_network)
        self.timings: dict[str, float] = {}
        self.stopped = False
        self.left_behind: list[str] = []

    # --- what tests use ------------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    @property
    def api(self) -> Admin:
        assert self._api is not None, "the cluster is not started"
        return self._api

    @property
    def apiserver(self) -> KubeApiServer:
        """The API server (for `write_kubeconfig`, `service_account_token`, `new_namespace`)."""
        assert self._apiserver is not None
        return self._apiserver

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(self.binaries["kubectl"]), "--kubeconfig", str(self.kubeconfig), *args]
        result = subprocess.run(
            argv, capture_output=True, text=True, input=input, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr}")
        return result

    def exec(
        self, namespace: str, pod: str, argv: list[str], *, container: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run argv in the pod (kubectl exec); the result's returncode is the command's."""
        where = ["-c", container] if container else []
        return self.kubectl("exec", "-n", namespace, pod, *where, "--", *argv, check=False, timeout=timeout)

    def import_image(self, archive: Path | str) -> None:
        """Import an OCI (or docker) archive into the node's containerd, where pods find it by the
        name it was saved under (use imagePullPolicy: Never or IfNotPresent: nothing is pulled)."""
        result = self._ctr("images", "import", str(archive), timeout=300)
        if result.returncode != 0:
            raise KubeClusterUnavailable(f"importing {archive}: {result.stderr or result.stdout}")

    def login_settings(self, image: str) -> dict[str, Any]:
        """The `kube` settings (besides namespace and kubeconfig) for login pods that run here: the
        imported `image`, never pulled, homes on the local StorageClass, small requests (one node
        holds the pods of a test run), ssh admitted from the node (where the tests' ssh runs)."""
        return {
            "image": image,
            "image_pull_policy": "Never",
            "home_storage_class": self.storage_class,
            "home_size": "64Mi",
            "cpu": "1",
            "memory": "512Mi",
            "cpu_request": "20m",
            "memory_request": "32Mi",
            "ssh_sources": [f"{self.node_ip}/32"],
        }

    def new_namespace(self, prefix: str = "t", pod_security: str | None = "restricted") -> str:
        """A fresh namespace (Pod Security enforced at that level), once its `default`
        ServiceAccount exists (pods cannot be created before)."""
        name = self.apiserver.new_namespace(prefix, pod_security)
        self.wait_for(
            lambda: self.api.get(f"/api/v1/namespaces/{name}/serviceaccounts/default") is not None,
            f"the default ServiceAccount of {name}",
            timeout=30,
        )
        return name

    def wait_for(
        self, check: Callable[[], object], what: str, timeout: float = 60, interval: float = 0.2
    ) -> Any:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                last = check()
            except (httpx.HTTPError, ApiError) as exc:
                last = exc
            else:
                if last:
                    return last
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")

    def resolve(self, name: str) -> list[str]:
        """The IPv4 addresses the cluster's DNS (CoreDNS on the node) gives `name`, as a pod's
        resolver asks it: `NAME.NAMESPACE.svc` with the cluster domain appended (a pod's search
        list does that). A headless Service's name gives its ready pods' own addresses (none while
        its pod sleeps or starts), any other Service's its ClusterIP. [] for a name it does not
        know. The host does not use this DNS: tests that address a Service as a pod would ask here."""
        query = name if name.endswith(".") else f"{name}.{CLUSTER_DOMAIN}."
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = [self.node_ip]
        resolver.lifetime = 5.0
        try:
            answer = resolver.resolve(query, "A", search=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return []
        return sorted(str(record) for record in answer)

    def wait_pod_ready(self, namespace: str, name: str, timeout: float = 90) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            pod = self.api.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
            conditions = (pod or {}).get("status", {}).get("conditions", [])
            if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                return pod
            return None

        try:
            pod: dict[str, Any] = self.wait_for(ready, f"pod {namespace}/{name} to be Ready", timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.describe_pod(namespace, name)}") from None
        return pod

    def describe_pod(self, namespace: str, name: str) -> str:
        """The pod's status and events, for messages of failed tests."""
        pod = self.api.get(f"/api/v1/namespaces/{namespace}/pods/{name}") or {}
        status = pod.get("status", {})
        events = self.kubectl("get", "events", "-n", namespace, check=False).stdout
        return f"pod status: {json.dumps(status)[:3000]}\nevents:\n{events[-3000:]}"

    def log(self, name: str) -> str:
        path = self.root / "logs" / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    # --- start ---------------------------------------------------------------------------------------

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    def start(self, timeout: float = 120) -> KubeCluster:
        begin = time.monotonic()
        try:
            self._take_lock()
            self._snapshot = hoststate.HostSnapshot()
            self._snapshot.save(self.root / SNAPSHOT)
            self._network()
            self._apiserver = _ClusterApiServer(self.root / "apiserver", self.node_ip)
            self._apiserver.root.mkdir()
            self._apiserver.start(timeout)
            self.timings["apiserver"] = time.monotonic() - begin
            self._api = self._apiserver.admin()
            self._apiserver.write_kubeconfig(
                self.kubeconfig, cert=self._apiserver.admin_cert, key=self._apiserver.admin_key
            )
            self._component_kubeconfigs()
            self._start_containerd(timeout)
            self.import_image(self.binaries["pause.oci.tar"])
            self._start_control_plane()
            self._start_coredns(timeout)
            self._start_kubelet()
            self._start_kube_proxy()
            self.wait_for(self._node_ready, "the node to be Ready", timeout)
            self.timings["node_ready"] = time.monotonic() - begin
            self._start_kube_router()
            self._storage()
            self.wait_for(
                lambda: self.api.get("/api/v1/namespaces/default/serviceaccounts/default"),
                "the default ServiceAccount",
                timeout,
            )
        except BaseException as exc:
            logs = {name: self.log(name)[-1500:] for name in self.processes}
            self.stop()
            failures = (
                KubeClusterUnavailable,
                KubeApiUnavailable,
                AssertionError,
                OSError,
                subprocess.SubprocessError,
            )
            if isinstance(exc, failures):
                detail = "\n".join(f"--- {name}:\n{text}" for name, text in logs.items() if text)
                raise KubeClusterUnavailable(f"the test cluster did not start: {exc}\n{detail}") from exc
            raise
        self.timings["ready"] = time.monotonic() - begin
        return self

    def _take_lock(self) -> None:
        self._lock = LOCK_FILE.open("a+")
        deadline = time.monotonic() + self.lock_wait
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self._lock.seek(0)
                    holder = self._lock.read().strip()
                    raise KubeClusterUnavailable(
                        f"another test cluster ({holder}) has held {LOCK_FILE} for {self.lock_wait:.0f} s"
                    ) from None
                time.sleep(1)
        self._locked = True
        self._lock.seek(0)
        previous = self._lock.read().split()
        if previous[:1] == ["root"] and len(previous) > 1 and Path(previous[1]) != self.root:
            recover(Path(previous[1]))
        self._lock.seek(0)
        self._lock.truncate()
        self._lock.write(f"root {self.root} pid {os.getpid()}\n")
        self._lock.flush()

    def _network(self) -> None:
        """The pod bridge, made here with the host's address on it, so that it can be the node's."""
        self.pod_cidr = str(_free_subnet())
        network = ipaddress.IPv4Network(self.pod_cidr)
        self.node_ip = self.pod_gateway = str(network.network_address + 1)
        self._config = NodeConfig(self.root, self.node_ip, self.pod_cidr, self.binaries, self.sync_frequency)
        if BRIDGE in hoststate.links():
            raise KubeClusterUnavailable(
                f"network interface {BRIDGE} exists already (a cluster left behind?)"
            )
        for argv in (
            ["ip", "link", "add", BRIDGE, "type", "bridge"],
            ["ip", "addr", "add", f"{self.node_ip}/{network.prefixlen}", "dev", BRIDGE],
            ["ip", "link", "set", BRIDGE, "up"],
        ):
            subprocess.run(argv, check=True, capture_output=True)
        # bridged pod-to-pod traffic must pass iptables (Service DNAT, NetworkPolicy); pods' replies
        # through the node are routed
        for name in ("net.bridge.bridge-nf-call-iptables", "net.ipv4.ip_forward"):
            hoststate.write_sysctl(name, "1")

    @property
    def config(self) -> NodeConfig:
        assert self._config is not None, "the node's network is not made yet"
        return self._config

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        (self.root / "logs").mkdir(exist_ok=True)
        log = (self.root / "logs" / f"{name}.log").open("wb")
        self._logs.append(log)
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[name] = process
        return process

    def _component_kubeconfigs(self) -> None:
        apiserver = self.apiserver
        assert apiserver.ca is not None
        for name, subject in component_subjects(self.node_name).items():
            cert, key = apiserver.ca.issue(subject, server=False)
            cert_path = self.root / f"{name}.pem"
            key_path = self.root / f"{name}.key"
            for path, data in ((cert_path, cert), (key_path, key)):
                path.write_bytes(data)
                path.chmod(0o600)
            apiserver.write_kubeconfig(self.config.kubeconfig(name), cert=cert_path, key=key_path)

    def _start_containerd(self, timeout: float) -> None:
        base = self.config.containerd_dir
        self.config.cni_conf_dir.mkdir(parents=True)
        base.mkdir()
        (base / "config.toml").write_text(self.config.containerd_toml())
        (self.config.cni_conf_dir / "10-sup-test.conflist").write_text(self.config.cni_conflist())
        process = self._spawn("containerd", ["containerd", "--config", str(base / "config.toml")])

        def up() -> bool:
            if process.poll() is not None:
                raise KubeClusterUnavailable(f"containerd exited: {self.log('containerd')}")
            return self.containerd_socket.exists() and self._ctr("version").returncode == 0

        self.wait_for(up, "containerd", timeout)

    def _ctr(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        argv = ["ctr", "--address", str(self.containerd_socket), "--namespace", "k8s.io", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)

    def _start_control_plane(self) -> None:
        self._spawn(
            "kube-controller-manager", self.config.controller_manager_argv(self.apiserver.root, free_port())
        )
        self._spawn("kube-scheduler", self.config.scheduler_argv(free_port()))

    def _start_kubelet(self) -> None:
        path = self.root / "kubelet.yaml"
        path.write_text(self.config.kubelet_yaml(free_port(), self.apiserver.ca_file))
        self._spawn("kubelet", self.config.kubelet_argv(path))

    def _start_coredns(self, timeout: float) -> None:
        """The cluster's DNS on the node's address, port 53 (a kubelet hands pods an address, no
        port): Services' and pods' names from the API server, any other name forwarded to the
        host's resolvers. No cache: a Service a test has just made resolves at once."""
        ready_port = free_port()
        corefile = self.root / "Corefile"
        corefile.write_text(self.config.corefile(ready_port, forward=bool(_host_nameservers())))
        process = self._spawn("coredns", [str(self.binaries["coredns"]), "-conf", str(corefile)])

        def ready() -> bool:
            if process.poll() is not None:
                raise KubeClusterUnavailable(f"coredns exited: {self.log('coredns')}")
            try:
                return httpx.get(f"http://127.0.0.1:{ready_port}/ready", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        self.wait_for(ready, "CoreDNS", timeout)

    def _start_kube_proxy(self) -> None:
        path = self.root / "kube-proxy.yaml"
        path.write_text(self.config.kube_proxy_yaml(free_port(), free_port()))
        self._spawn("kube-proxy", [str(self.binaries["kube-proxy"]), f"--config={path}", "--v=0"])

    def _node_ready(self) -> bool:
        for name in ("kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler", "containerd"):
            if self.processes[name].poll() is not None:
                raise KubeClusterUnavailable(f"{name} exited: {self.log(name)}")
        node = self.api.get(f"/api/v1/nodes/{self.node_name}")
        conditions = (node or {}).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def _start_kube_router(self) -> None:
        """After the node is Ready: kube-router exits when it cannot find its node."""
        process = self._spawn("kube-router", self.config.kube_router_argv())

        def syncing() -> bool:
            if process.poll() is not None:
                raise KubeClusterUnavailable(f"kube-router exited: {self.log('kube-router')}")
            return (
                "KUBE-ROUTER-FORWARD"
                in subprocess.run(
                    ["iptables", "-w", "-S"], capture_output=True, text=True, check=False
                ).stdout
            )

        self.wait_for(syncing, "kube-router's firewall chains", 60)

    def _storage(self) -> None:
        try:
            self.api.create("/apis/storage.k8s.io/v1/storageclasses", storage_class(self.storage_class))
        except ApiError as exc:
            if exc.status != 409:
                raise
        # its own client: the provisioner's thread must not share the tests' connection pool
        self._provisioner = LocalProvisioner(
            self.apiserver.admin(), self.storage_class, self.node_name, self.root / "volumes"
        ).start()

    # --- stop ----------------------------------------------------------------------------------------

    def stop(self) -> list[str]:
        """Tear everything down; return what could not be put back (empty when all is clean).
        A second call does nothing and returns the first one's answer."""
        if self.stopped:
            return self.left_behind
        self.stopped = True
        begin = time.monotonic()
        if self._provisioner is not None:
            self._provisioner.stop()
            self._provisioner.admin.http.close()
        # nothing may recreate pods while they are deleted
        for name in ("kube-controller-manager", "kube-scheduler"):
            stop_process(self.processes.get(name), timeout=10)
        if self._api is not None and self._running("kubelet"):
            with contextlib.suppress(httpx.HTTPError, ApiError):
                self._delete_pods()
        for name in ("kube-router", "kube-proxy", "kubelet", "coredns"):
            stop_process(self.processes.get(name), timeout=10)
        if "kube-router" in self.processes:
            self._cleanup("kube-router", [*self.config.kube_router_argv(), "--cleanup-config"])
        if "kube-proxy" in self.processes:
            self._cleanup("kube-proxy", [str(self.binaries["kube-proxy"]), "--cleanup"])
        if self._running("containerd"):
            self._stop_containers()
        stop_process(self.processes.get("containerd"), timeout=10)
        self._kill_strays()
        if self._api is not None:
            self._api.http.close()
        if self._apiserver is not None:
            for process in reversed(self._apiserver.processes):
                stop_process(process, timeout=10)  # kube-apiserver ignores SIGTERM once etcd is gone
            for log in self._apiserver._logs:
                log.close()
        for log in self._logs:
            log.close()
        left: list[str] = []
        if self._snapshot is not None:
            left = self._snapshot.restore(self.root, BRIDGE)
        else:
            shutil.rmtree(self.root, ignore_errors=True)
        if self._lock is not None:
            if self._locked:
                self._lock.truncate(0)  # nothing to recover
            self._lock.close()  # releases the flock
            self._lock = None
        self.timings["stop"] = time.monotonic() - begin
        self.left_behind = left
        return left

    def _running(self, name: str) -> bool:
        process = self.processes.get(name)
        return process is not None and process.poll() is None

    def _delete_pods(self, timeout: float = 30) -> None:
        """Delete every pod at once and wait until the kubelet has stopped their containers and
        sandboxes (containerd runs no task): stopping a sandbox is what makes the CNI plugin release
        its veth and address. Waiting for the API objects instead would add the kubelet's
        housekeeping rounds (~5 s)."""
        for pod in self.api.items("/api/v1/pods"):
            meta = pod["metadata"]
            with contextlib.suppress(ApiError):
                self.api.http.request(
                    "DELETE",
                    f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                    json={"gracePeriodSeconds": 0},
                )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._ctr("tasks", "ls", "-q").stdout.split():
            time.sleep(0.2)

    def _cleanup(self, name: str, argv: list[str]) -> None:
        with (self.root / "logs" / f"{name}-cleanup.log").open("wb") as log:
            subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=60, check=False)

    def _stop_containers(self) -> None:
        """Whatever the kubelet left running: kill the tasks so the shims exit."""
        tasks = [line.split()[0] for line in self._ctr("tasks", "ls").stdout.splitlines()[1:] if line.split()]
        for task in tasks:
            self._ctr("tasks", "kill", "--signal", "SIGKILL", task)
        for task in tasks:
            for _ in range(20):
                if self._ctr("tasks", "delete", task).returncode == 0:
                    break
                time.sleep(0.25)
        for container in self._ctr("containers", "ls", "-q").stdout.split():
            self._ctr("containers", "delete", container)

    def _kill_strays(self) -> None:
        """containerd's shims outlive containerd (and a container the kubelet did not stop
        outlives both): kill what is left, by pid."""
        if self._snapshot is not None:
            hoststate.kill_processes(self.root, self._snapshot)


def recover(root: Path) -> list[str]:
    """Put the host back after a test run that died without its teardown (SIGKILL, a crash): kill
    what its cluster (rooted at `root`) left running and undo its host changes with the snapshot it
    saved. Runs by itself when the next cluster starts; by hand: `python -m tests.support.kubenode`."""
    snapshot_file = root / SNAPSHOT
    if not snapshot_file.exists():
        return []
    snapshot = hoststate.HostSnapshot.load(snapshot_file)
    hoststate.kill_processes(root, snapshot)
    time.sleep(1)  # let the kernel release their mounts and network namespaces
    return snapshot.restore(root, BRIDGE)


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _recover_from_lock() -> int:
    """`python -m tests.support.kubenode`: clean up after a test run that died with its cluster up."""
    with LOCK_FILE.open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"a test cluster is running (lock {LOCK_FILE} held): nothing to recover")
            return 1
        lock.seek(0)
        words = lock.read().split()
        if words[:1] != ["root"] or len(words) < 2:
            print("no test cluster to recover")
            return 0
        left = recover(Path(words[1]))
        lock.truncate(0)
        print(f"recovered {words[1]}" + (f"; still left: {left}" if left else ""))
        return 1 if left else 0


if __name__ == "__main__":
    raise SystemExit(_recover_from_lock())
