"""SUP provisioning people onto the real test node (tests/support/kubenode.py), so that they log in.

A `LoginSite` is a job stack (tests/e2e/conftest.py: `sup serve` with its LDAP base and Slurm cluster
those of the real slurmctld + slurmd) whose `kube` section points at the real cluster: login pods run
SUP's login image (scripts/build-images, imported into the node), homes are local volumes, the Slurm
client configuration is a ConfigMap naming the controller at the node's address on the pod bridge, and
the munge key is a Secret only the pods' munge sidecar mounts. People reach their pod with `ssh` from
the host at the address its headless Service's name has in the cluster's DNS (the pod's own), as
`ssh_sources` allows.
"""

from __future__ import annotations

import base64
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from sup.config import GatewaySettings
from sup.targets.kube import KubeSettings
from tests.e2e.stack import Stack
from tests.support.kubenode import KubeCluster
from tests.support.server import SupServer
from tests.support.slurmctld import SlurmController

API = "/api/v1"
SLURM_CONFIG_MAP = "slurm-conf"
MUNGE_SECRET = "munge-key"
SSH_FAILED = 255  # ssh's own exit status: refused, unreachable, authentication failed


@dataclass
class Person:
    name: str
    key: Path  # the private key file; `key.pub` beside it

    @property
    def public(self) -> str:
        return Path(f"{self.key}.pub").read_text().strip()


def new_person(directory: Path, name: str, suffix: str = "") -> Person:
    """A person with an ed25519 key pair made by ssh-keygen (as a researcher would)."""
    key = directory / f"{name}{suffix}_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}{suffix}@test", "-f", str(key)],
        check=True,
        capture_output=True,
    )
    return Person(name, key)


class Through:
    """OpenSSH's client through the gateway (`ssh -J`, `scp -J`) with one person's key only."""

    def __init__(
        self, directory: Path, person: Person, gateway_port: int, gateway_host: str = "127.0.0.1"
    ) -> None:
        self.jump = f"{person.name}@{gateway_host}:{gateway_port}"
        self.config = directory / f"ssh_config-{person.name}-{time.monotonic_ns()}"
        self.config.write_text(
            "Host *\n"
            f"    IdentityFile {person.key}\n"
            "    IdentitiesOnly yes\n"
            "    IdentityAgent none\n"
            f"    UserKnownHostsFile {directory / f'known_hosts-{person.name}'}\n"
            "    StrictHostKeyChecking accept-new\n"
            "    BatchMode yes\n"
            "    ConnectTimeout 90\n"
            "    LogLevel ERROR\n"
        )

    def ssh(
        self, user: str, command: str, pod: str = "login", options: tuple[str, ...] = ()
    ) -> subprocess.CompletedProcess[str]:
        """`ssh -J ... USER@POD COMMAND`; `options` go before the destination (e.g. `-A`)."""
        argv = ["ssh", "-F", str(self.config), *options, "-J", self.jump, f"{user}@{pod}", command]
        return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)

    def hold(self, user: str, pod: str = "login") -> subprocess.Popen[bytes]:
        """A session held open until the caller kills this client: its command in the pod reads
        stdin, so it ends with the connection (a `sleep` would outlive it, and keep the pod busy)."""
        argv = ["ssh", "-F", str(self.config), "-J", self.jump, f"{user}@{pod}", "cat >/dev/null"]
        return subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def scp(self, *paths: str) -> subprocess.CompletedProcess[str]:
        argv = ["scp", "-F", str(self.config), "-J", self.jump, *paths]
        return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)

    def sftp(self, destination: str, batch: str) -> subprocess.CompletedProcess[str]:
        """`sftp -J ... -b - DESTINATION` with the commands in `batch`."""
        argv = ["sftp", "-F", str(self.config), "-J", self.jump, "-b", "-", destination]
        return subprocess.run(argv, input=batch, capture_output=True, text=True, timeout=180, check=False)

    def rsync(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        """`rsync -e 'ssh -J ...' ARGUMENTS`."""
        remote_shell = f"ssh -F {self.config} -J {self.jump}"
        argv = ["rsync", "-e", remote_shell, *arguments]
        return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)


@dataclass
class LoginSite:
    stack: Stack
    cluster: KubeCluster
    directory: Path
    server: SupServer | None = None
    admin: dict[str, str] = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        return self.stack.namespace

    def start(self, host: str = "127.0.0.1") -> LoginSite:
        self.server = self.stack.serve(host=host)
        self.admin = self.admin or self.stack.token()
        return self

    def restart(self) -> None:
        """Stop `sup serve` and start it again (after a change to `stack.config`)."""
        assert self.server is not None
        self.server.stop()
        self.stack.servers.remove(self.server)
        self.server = self.stack.serve()

    # --- the admin API -----------------------------------------------------------------------------

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        assert self.server is not None
        return httpx.request(
            method, f"{self.server.url}{API}/{path}", json=body, headers=self.admin, timeout=30
        )

    def reconcile(self, *targets: str, timeout: float = 120) -> dict[str, Any]:
        """POST /reconcile, waiting while another pass holds the lock (409), e.g. the pass a
        freshly started `sup serve` runs."""
        deadline = time.monotonic() + timeout
        while True:
            response = self.call("POST", "reconcile", {"targets": list(targets) or None})
            if response.status_code != 409 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.call("POST", path, body)
        assert response.status_code == 201, response.text
        return dict(response.json())

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.call("PATCH", path, body)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def add(self, person: Person, *groups: str) -> dict[str, Any]:
        return self.post(
            "users", {"username": person.name, "groups": list(groups), "ssh_public_keys": [person.public]}
        )

    # --- what the cluster runs -----------------------------------------------------------------------

    def pod_of(self, login: str) -> str:
        """The pod of a login StatefulSet (`login-KEY` or `group-KEY`)."""
        return f"{login}-0"

    def wait_ready(self, login: str, timeout: float = 120) -> dict[str, Any]:
        self.cluster.wait_for(
            lambda: self.cluster.api.get(f"/api/v1/namespaces/{self.namespace}/pods/{self.pod_of(login)}"),
            f"SUP's pod {self.pod_of(login)}",
            timeout=timeout,
        )
        return self.cluster.wait_pod_ready(self.namespace, self.pod_of(login), timeout=timeout)

    def login_address(self, login: str) -> tuple[str, int]:
        """Where a client in the cluster reaches a login pod by its Service's name: the login
        Service is headless, so the cluster's DNS gives the pod's own address (none while the pod
        is not ready), at sshd's port (kube.ssh_port). The host does not use that DNS: asked here."""
        name = f"{login}.{self.namespace}.svc"
        addresses = self.cluster.resolve(name)
        assert addresses, f"{name} has no address in the cluster's DNS (is its pod ready?)"
        default = KubeSettings.model_fields["ssh_port"].default
        return addresses[0], int(self.stack.config["kube"].get("ssh_port", default))

    def gone(self, path: str) -> bool:
        return self.cluster.api.get(f"/api/v1/namespaces/{self.namespace}/{path}") is None

    # --- ssh -------------------------------------------------------------------------------------------

    def ssh(
        self,
        person: Person,
        login: str,
        command: str,
        *,
        as_user: str | None = None,
        known_hosts: Path | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """`ssh -p PORT USER@<the login pod's address> COMMAND` with the person's key only
        (`login_address`: by the pod's headless Service). With `known_hosts` the host key must
        match the one recorded there (the first call records it)."""
        hosts = known_hosts or self.directory / f"known_hosts-{time.monotonic_ns()}"
        host, port = self.login_address(login)
        argv = [
            "ssh",
            "-i", str(person.key),
            "-o", "IdentitiesOnly=yes",
            "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=10",
            "-o", f"UserKnownHostsFile={hosts}",
            "-o", "StrictHostKeyChecking=accept-new",
            "-o", "LogLevel=ERROR",
            "-p", str(port),
            f"{as_user or person.name}@{host}",
            command,
        ]  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)

    def ssh_ok(self, person: Person, login: str, command: str, **kwargs: Any) -> str:
        result = self.ssh(person, login, command, **kwargs)
        assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
        return result.stdout

    def wait_ssh(self, person: Person, login: str, timeout: float = 60) -> float:
        """Seconds until `ssh ... true` succeeds (a pod's name has no address until it is ready,
        and sshd may refuse for a moment)."""
        started = time.monotonic()
        last: subprocess.CompletedProcess[str] | AssertionError | None = None
        while time.monotonic() - started < timeout:
            try:
                last = self.ssh(person, login, "true", timeout=20)
            except AssertionError as exc:  # no address yet
                last = exc
            else:
                if last.returncode == 0:
                    return time.monotonic() - started
            time.sleep(0.5)
        raise AssertionError(f"ssh {person.name}@{login} did not succeed within {timeout} s: {last}")


def slurm_pod_settings(cluster: KubeCluster, controller: SlurmController) -> dict[str, Any]:
    """The `kube` settings that let login pods on `cluster` run jobs on `controller` (reached at the
    node's address on the pod bridge): its ports in the NetworkPolicy, slurm_objects' names."""
    gateway = f"{cluster.pod_gateway}/32"
    return {
        "slurmctld_cidrs": [gateway],
        "slurmctld_ports": [controller.ctld_port],
        "slurmd_cidrs": [gateway],
        "slurmd_ports": [controller.slurmd_port],
        "srun_port_range": f"{controller.srun_ports[0]}-{controller.srun_ports[1]}",
        "slurm_config_map": SLURM_CONFIG_MAP,
        "munge_key_secret": MUNGE_SECRET,
    }


def slurm_objects(cluster: KubeCluster, namespace: str, slurm_conf: str, munge_key: bytes) -> None:
    """The site's Slurm client configuration and munge key in the users' namespace, as an operator
    creates them (SUP only names them in the pods it writes)."""
    cluster.api.create(
        f"/api/v1/namespaces/{namespace}/configmaps",
        {"metadata": {"name": SLURM_CONFIG_MAP}, "data": {"slurm.conf": slurm_conf}},
    )
    cluster.api.create(
        f"/api/v1/namespaces/{namespace}/secrets",
        {
            "metadata": {"name": MUNGE_SECRET},
            "data": {"munge.key": base64.b64encode(munge_key).decode()},
        },
    )


def admit_host_to_idle_reporters(cluster: KubeCluster, namespace: str, name: str = "host-gateway") -> None:
    """A NetworkPolicy admitting the host (where a test's or the demo's gateway runs) to the login pods'
    idle reporters, as the chart's admits the gateway's pods; `kube.ssh_sources` admits it to sshd."""
    cluster.api.create(
        f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies",
        {
            "metadata": {"name": name},
            "spec": {
                "podSelector": {"matchLabels": {"app.kubernetes.io/managed-by": "sup"}},
                "policyTypes": ["Ingress"],
                "ingress": [
                    {
                        "from": [{"ipBlock": {"cidr": f"{cluster.node_ip}/32"}}],
                        "ports": [{"protocol": "TCP", "port": GatewaySettings().idle_port}],
                    }
                ],
            },
        },
    )
