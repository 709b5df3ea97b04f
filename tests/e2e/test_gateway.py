"""The SSH gateway on the real test node: people reach their own login pod through one address with
`ssh -J` and their own key, the pod sleeps when idle and the next connection wakes it, the home
intact. SUP (`sup serve`) keeps the pods and answers the gateway; the gateway runs in this process
(`sup gateway`'s server) and reaches a pod at its Service's ClusterIP, as it would by DNS inside
the cluster."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sup.config import GatewaySettings
from sup.gateway_server import PodRoute
from tests.e2e.login_site import SSH_FAILED, LoginSite, Person, new_person
from tests.support.gateway_runner import RunningGateway, write_host_key
from tests.support.kubenode import KubeCluster


class Through:
    """OpenSSH's client through the gateway (`ssh -J`, `scp -J`) with one person's key only."""

    def __init__(self, directory: Path, person: Person, gateway_port: int) -> None:
        self.jump = f"{person.name}@127.0.0.1:{gateway_port}"
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

    def ssh(self, user: str, command: str, pod: str = "login") -> subprocess.CompletedProcess[str]:
        argv = ["ssh", "-F", str(self.config), "-J", self.jump, f"{user}@{pod}", command]
        return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)

    def scp(self, *paths: str) -> subprocess.CompletedProcess[str]:
        argv = ["scp", "-F", str(self.config), "-J", self.jump, *paths]
        return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)


@pytest.fixture
def gateway_site(
    make_login_site: Callable[..., LoginSite], kube_cluster: KubeCluster, tmp_path: Path
) -> Iterator[tuple[LoginSite, RunningGateway]]:
    site = make_login_site()
    site.stack.config["gateway"] = {"idle_seconds": 1, "heartbeat_seconds": 1, "wake_timeout_seconds": 150}
    site.start(host="0.0.0.0")
    assert site.server is not None
    # The chart's gateway NetworkPolicy admits the gateway's pods to sshd and the idle reporter; here
    # the gateway runs on the host, whose address kube.ssh_sources admits to sshd only.
    site.cluster.api.create(
        f"/apis/networking.k8s.io/v1/namespaces/{site.namespace}/networkpolicies",
        {
            "metadata": {"name": "test-gateway"},
            "spec": {
                "podSelector": {"matchLabels": {"app.kubernetes.io/managed-by": "sup"}},
                "policyTypes": ["Ingress"],
                "ingress": [
                    {
                        "from": [{"ipBlock": {"cidr": f"{kube_cluster.node_ip}/32"}}],
                        "ports": [{"protocol": "TCP", "port": GatewaySettings().idle_port}],
                    }
                ],
            },
        },
    )
    token = site.stack.token("gateway")["Authorization"].removeprefix("Bearer ")

    def at_service(pod: PodRoute) -> tuple[str, int]:
        return site.service_ip(pod.service), pod.port

    gateway = RunningGateway(
        site.server.url,
        write_host_key(tmp_path / "gateway_host_key"),
        token=token,
        address=at_service,
        wake_timeout_seconds=150,
    )
    try:
        yield site, gateway
    finally:
        gateway.stop()


def test_through_the_gateway_to_their_own_pod_then_asleep_and_woken_with_the_home_kept(
    gateway_site: tuple[LoginSite, RunningGateway], tmp_path: Path
) -> None:
    site, gateway = gateway_site
    alice, bob = new_person(site.directory, "alice"), new_person(site.directory, "bob")
    site.add(alice)
    site.add(bob)
    site.wait_ready("login-alice")
    site.wait_ssh(alice, "login-alice")  # its sshd answers (directly) before the gateway is tried
    through = Through(tmp_path, alice, gateway.port)

    landed = through.ssh("alice", "id -un; hostname; touch ~/kept")
    assert landed.returncode == 0, landed.stderr
    assert landed.stdout.split() == ["alice", "login-alice-0"]

    # scp both ways through the same hop
    sent = tmp_path / "notes.txt"
    sent.write_text("through the gateway\n")
    assert through.scp(str(sent), "alice@login:notes.txt").returncode == 0
    back = tmp_path / "back.txt"
    copied = through.scp("alice@login:notes.txt", str(back))
    assert copied.returncode == 0, copied.stderr
    assert back.read_text() == "through the gateway\n"

    # bob's key does not get him into alice's pod, nor through the gateway as alice
    refused = Through(tmp_path, bob, gateway.port).ssh("alice", "id")
    assert refused.returncode == SSH_FAILED and "Permission denied" in refused.stderr

    # idle (nobody connected for idle_seconds): SUP's pass scales the pod to zero; the home stays
    site.reconcile("kube")
    time.sleep(1.5)
    site.reconcile("kube")
    statefulset = f"/apis/apps/v1/namespaces/{site.namespace}/statefulsets/login-alice"
    assert site.cluster.api.get(statefulset)["spec"]["replicas"] == 0  # type: ignore[index]
    site.cluster.wait_for(lambda: site.gone("pods/login-alice-0"), "alice's pod gone", timeout=120)

    # the next connection wakes it and lands, same home, same host key (known_hosts unchanged)
    started = time.monotonic()
    woken = through.ssh("alice", "id -un; ls ~/kept ~/notes.txt")
    print(f"wake through the gateway to a shell: {time.monotonic() - started:.1f} s")
    assert woken.returncode == 0, woken.stderr
    assert woken.stdout.split() == ["alice", "/home/alice/kept", "/home/alice/notes.txt"]
    assert site.cluster.api.get(statefulset)["spec"]["replicas"] == 1  # type: ignore[index]
