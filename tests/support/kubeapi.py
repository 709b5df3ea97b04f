"""A throwaway Kubernetes API server: etcd + kube-apiserver on free loopback ports, envtest-style.

etcd is Debian's etcd-server (3.4); kube-apiserver is built from the Go module proxy and cached by
scripts/build-kube-apiserver (run by scripts/test before pytest). Certificates come from the tests'
one CA (tests/support/certs.py): the server's certificate for 127.0.0.1, an admin client certificate in
O=system:masters, and the key that signs service-account tokens (so the TokenRequest API works and
SUP can run as a ServiceAccount bound to the chart's Role). Authorization is RBAC; admission has Pod
Security (enforced from namespace labels) and every default plugin but ServiceAccount.

There is no controller-manager, scheduler or kubelet: StatefulSets create no pods, pods stay Pending,
a PVC's deletion waits for the kubernetes.io/pvc-protection finalizer, namespaces never finish
terminating, and nothing is garbage-collected. Tests use a new namespace each.
Used by tests/kube and bench/kube_bench.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.certs import TestCa, client_subject, common_name, pem_cert, pem_key
from tests.support.ports import free_port
from tests.support.processes import stop_process

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build-kube-apiserver"
ISSUER = "https://kubernetes.default.svc.cluster.local"


class KubeApiUnavailable(RuntimeError):
    pass


def find_etcd() -> str:
    for candidate in (os.environ.get("SUP_ETCD"), shutil.which("etcd"), "/usr/bin/etcd"):
        if candidate and Path(candidate).is_file():
            return candidate
    raise KubeApiUnavailable("etcd is not installed: apt-get install etcd-server (scripts/setup --dev does)")


def find_kube_apiserver() -> str:
    """The cached kube-apiserver; building it takes minutes, so the fixtures do not: scripts/test
    (and scripts/setup --dev) run scripts/build-kube-apiserver first."""
    override = os.environ.get("SUP_KUBE_APISERVER")
    if override:
        return override
    result = subprocess.run(
        [str(BUILD_SCRIPT), "--cached-only"], capture_output=True, text=True, timeout=60, check=False
    )
    if result.returncode != 0 or not result.stdout.strip():
        raise KubeApiUnavailable(
            "kube-apiserver is not built yet: run scripts/build-kube-apiserver (scripts/test does it)"
        )
    return result.stdout.strip().splitlines()[-1]


# --- the server -------------------------------------------------------------------------------------


class KubeApiServer:
    # the addresses in the server's certificate; a cluster with nodes adds the node's and the
    # `kubernetes` Service's
    server_ips: tuple[str, ...] = ("127.0.0.1",)
    server_dns: tuple[str, ...] = ("localhost",)

    def __init__(self, root: Path | None = None, service_range: str = "10.0.0.0/16") -> None:
        """`service_range`: the ClusterIP range. A /16 holds 65,534 Services, and allocation slows
        to a few a second as it fills (measured at 42,000): a benchmark with more users than some
        40,000 gives a wider one."""
        self.etcd_binary = find_etcd()
        self.service_range = service_range
        self.apiserver_binary = find_kube_apiserver()
        shm = Path("/dev/shm")  # etcd fsyncs every write: a tmpfs makes that free
        parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
        self.root = root or Path(tempfile.mkdtemp(prefix="sup-kubeapi-", dir=parent))
        self.etcd_port, self.peer_port, self.port = free_port(), free_port(), free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen[bytes]] = []
        self._logs: list[Any] = []
        self.ca: TestCa | None = None

    # files
    @property
    def ca_file(self) -> Path:
        return self.root / "ca.pem"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    def _write(self, name: str, data: bytes, mode: int = 0o600) -> Path:
        path = self.root / name
        path.write_bytes(data)
        path.chmod(mode)
        return path

    def _certificates(self) -> None:
        ca = self.ca = TestCa("SUP test Kubernetes CA")
        self._write("ca.pem", pem_cert(ca.cert), 0o644)
        server_cert, server_key = ca.issue(
            common_name("kube-apiserver"),
            server=True,
            ips=self.server_ips,
            dns=self.server_dns,
        )
        self._write("server.pem", server_cert)
        self._write("server.key", server_key)
        admin_cert, admin_key = ca.issue(client_subject("sup-test-admin", "system:masters"), server=False)
        self.admin_cert = self._write("admin.pem", admin_cert)
        self.admin_key = self._write("admin.key", admin_key)
        signing = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._write("sa.key", pem_key(signing))
        self._write(
            "sa.pub",
            signing.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
            0o644,
        )
        self.write_kubeconfig(self.admin_kubeconfig, cert=self.admin_cert, key=self.admin_key)

    def write_kubeconfig(
        self, path: Path, *, token: str | None = None, cert: Path | None = None, key: Path | None = None
    ) -> Path:
        user: dict[str, str] = {}
        if token is not None:
            user["token"] = token
        if cert is not None and key is not None:
            user["client-certificate"] = str(cert)
            user["client-key"] = str(key)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "test", "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)}}
            ],
            "users": [{"name": "test", "user": user}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
            "current-context": "test",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = (self.root / f"{name}.log").open("wb")
        self._logs.append(log)
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self.processes.append(process)
        return process

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def start(self, timeout: float = 90) -> KubeApiServer:
        self._certificates()
        etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        peer_url = f"http://127.0.0.1:{self.peer_port}"
        etcd = self._spawn(
            "etcd",
            [
                self.etcd_binary, "--name", "sup-test", "--data-dir", str(self.root / "etcd"),
                "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
                "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                "--initial-cluster", f"sup-test={peer_url}", "--logger", "zap", "--log-level", "warn",
            ],
        )  # fmt: skip
        self._wait(
            lambda: httpx.get(f"{etcd_url}/health", timeout=1).status_code == 200, etcd, "etcd", timeout
        )
        self._start_apiserver(etcd_url, timeout)
        return self

    def apiserver_flags(self) -> list[str]:
        """kube-apiserver's flags besides etcd's address (a cluster with nodes adds to them)."""
        return [
            f"--secure-port={self.port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--cert-dir={self.root / 'certs'}",
            f"--tls-cert-file={self.root / 'server.pem'}",
            f"--tls-private-key-file={self.root / 'server.key'}",
            f"--client-ca-file={self.ca_file}",
            f"--service-cluster-ip-range={self.service_range}",
            "--allow-privileged=true",
            "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={self.root / 'sa.pub'}",
            f"--service-account-signing-key-file={self.root / 'sa.key'}",
            "--profiling=false",
            "--v=0",
        ]

    def _start_apiserver(self, etcd_url: str, timeout: float) -> None:
        apiserver = self._spawn(
            "kube-apiserver", [self.apiserver_binary, f"--etcd-servers={etcd_url}", *self.apiserver_flags()]
        )
        with self.admin() as admin:

            def ready() -> bool:
                return admin.http.get("/readyz", timeout=2).status_code == 200

            self._wait(ready, apiserver, "kube-apiserver", timeout)

    def _wait(self, check: Any, process: subprocess.Popen[bytes], name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise KubeApiUnavailable(f"{name} exited with {process.returncode}: {self.log(name)}")
            with contextlib.suppress(httpx.HTTPError):
                if check():
                    return
            time.sleep(0.2)
        raise KubeApiUnavailable(f"{name} was not ready within {timeout:.0f} s: {self.log(name)}")

    # --- outages (fault tests) ---------------------------------------------------------------------

    def kill_apiserver(self) -> None:
        """SIGKILL kube-apiserver (etcd keeps the data): clients get "connection refused"."""
        apiserver = self.processes[-1]
        apiserver.kill()
        apiserver.wait()

    def restart_apiserver(self, timeout: float = 120) -> None:
        self._start_apiserver(f"http://127.0.0.1:{self.etcd_port}", timeout)

    def stop(self) -> None:
        for process in reversed(self.processes):
            stop_process(process)
        for log in self._logs:
            log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def admin(self) -> Admin:
        return Admin(self.url, self.ca_file, cert=(self.admin_cert, self.admin_key))

    def as_token(self, token: str) -> Admin:
        return Admin(self.url, self.ca_file, token=token)

    # --- namespaces and identities ------------------------------------------------------------------

    def new_namespace(self, prefix: str = "t", pod_security: str | None = "restricted") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        labels = {}
        if pod_security:
            labels = {
                "pod-security.kubernetes.io/enforce": pod_security,
                "pod-security.kubernetes.io/warn": pod_security,
            }
        with self.admin() as admin:
            admin.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels}})
        return name

    def service_account_token(self, namespace: str, name: str, seconds: int = 3600) -> str:
        """A token for the ServiceAccount (TokenRequest API: no controller-manager needed)."""
        with self.admin() as admin:
            if admin.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}") is None:
                admin.create(f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": name}})
            answer = admin.create(
                f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                 "spec": {"expirationSeconds": seconds}},
            )  # fmt: skip
        return str(answer["status"]["token"])


class ApiError(Exception):
    def __init__(self, response: httpx.Response) -> None:
        try:
            message = response.json().get("message", response.text)
        except ValueError:
            message = response.text
        super().__init__(f"{response.status_code} {message}")
        self.status = response.status_code
        self.message = str(message)


class Admin:
    """A plain HTTP client for fixtures and assertions, independent of the code under test."""

    def __init__(
        self, url: str, ca_file: Path, *, cert: tuple[Path, Path] | None = None, token: str | None = None
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        context = ssl.create_default_context(cafile=str(ca_file))
        if cert is not None:
            context.load_cert_chain(str(cert[0]), str(cert[1]))
        self.http = httpx.Client(base_url=url, verify=context, headers=headers, timeout=30)
        self.warnings: list[str] = []

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def _check(self, response: httpx.Response) -> dict[str, Any]:
        self.warnings.extend(response.headers.get_list("warning"))
        if response.status_code >= 300:
            raise ApiError(response)
        body: dict[str, Any] = response.json() if response.content else {}
        return body

    def get(self, path: str) -> dict[str, Any] | None:
        response = self.http.get(path)
        if response.status_code == 404:
            return None
        return self._check(response)

    def items(self, path: str, selector: str | None = None) -> list[dict[str, Any]]:
        params = {"labelSelector": selector} if selector else None
        items: list[dict[str, Any]] = self._check(self.http.get(path, params=params))["items"]
        return items

    def create(self, path: str, body: dict[str, Any], **params: str) -> dict[str, Any]:
        return self._check(self.http.post(path, json=body, params=params))

    def merge_patch(self, path: str, patch: dict[str, Any], **params: str) -> dict[str, Any]:
        headers = {"Content-Type": "application/merge-patch+json"}
        return self._check(self.http.patch(path, json=patch, headers=headers, params=params))

    def json_patch(self, path: str, operations: list[dict[str, Any]], **params: str) -> dict[str, Any]:
        headers = {"Content-Type": "application/json-patch+json"}
        return self._check(self.http.patch(path, json=operations, headers=headers, params=params))

    def apply(self, path: str, body: dict[str, Any], manager: str = "test-admin") -> dict[str, Any]:
        headers = {"Content-Type": "application/apply-patch+yaml"}
        params = {"fieldManager": manager, "force": "true"}
        return self._check(self.http.patch(path, json=body, headers=headers, params=params))

    def delete(self, path: str) -> dict[str, Any] | None:
        response = self.http.delete(path)
        if response.status_code == 404:
            return None
        return self._check(response)


# paths of the kinds the tests look at
def collection(namespace: str, plural: str) -> str:
    group = {
        "statefulsets": "/apis/apps/v1",
        "deployments": "/apis/apps/v1",
        "networkpolicies": "/apis/networking.k8s.io/v1",
        "roles": "/apis/rbac.authorization.k8s.io/v1",
        "rolebindings": "/apis/rbac.authorization.k8s.io/v1",
        "jobs": "/apis/batch/v1",
        "cronjobs": "/apis/batch/v1",
        "poddisruptionbudgets": "/apis/policy/v1",
    }.get(plural, "/api/v1")
    return f"{group}/namespaces/{namespace}/{plural}"
