"""Pods really run on the test node: exec, volumes of the local StorageClass, Services, Pod Security."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.node.conftest import RunPod, pod_manifest
from tests.support.kubeapi import ApiError
from tests.support.kubenode import KubeCluster
from tests.support.kubenode_config import KUBERNETES_SERVICE_IP

# what Pod Security "restricted" asks of a pod (POD_SECURITY) and of its containers (CONTAINER_SECURITY)
POD_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY: dict[str, Any] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
RESTRICTED: dict[str, Any] = {
    "securityContext": POD_SECURITY,
    "container": {"securityContext": CONTAINER_SECURITY},
}


def test_a_pod_runs_and_exec_reaches_it(kube_cluster: KubeCluster, namespace: str, run_pod: RunPod) -> None:
    pod = run_pod(namespace, name="hello")

    assert pod["status"]["phase"] == "Running"
    assert pod["spec"]["nodeName"] == kube_cluster.node_name
    assert pod["status"]["podIP"].startswith(kube_cluster.pod_cidr.rsplit(".", 2)[0])
    result = kube_cluster.exec(namespace, "hello", ["sh", "-c", "echo $(hostname) $(id -u)"])
    assert (result.returncode, result.stdout.strip()) == (0, "hello 0")
    assert kube_cluster.exec(namespace, "hello", ["false"]).returncode == 1


def test_a_claim_is_bound_and_its_files_survive_the_pod(
    kube_cluster: KubeCluster, namespace: str, run_pod: RunPod
) -> None:
    claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
    kube_cluster.api.create(
        claims,
        {
            "metadata": {"name": "data"},
            "spec": {
                "storageClassName": kube_cluster.storage_class,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Mi"}},
            },
        },
    )
    volume = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}
    mount = {"container": {"volumeMounts": [{"name": "data", "mountPath": "/data"}]}}
    run_pod(namespace, name="writer", **volume, **mount)
    assert kube_cluster.exec(namespace, "writer", ["sh", "-c", "echo kept > /data/file"]).returncode == 0

    claim = kube_cluster.api.get(f"{claims}/data")
    assert claim is not None and claim["status"]["phase"] == "Bound"
    pv = kube_cluster.api.get(f"/api/v1/persistentvolumes/{claim['spec']['volumeName']}")
    assert pv is not None and pv["spec"]["local"]["path"].startswith(str(kube_cluster.root))

    kube_cluster.api.delete(f"/api/v1/namespaces/{namespace}/pods/writer")
    kube_cluster.wait_for(
        lambda: kube_cluster.api.get(f"/api/v1/namespaces/{namespace}/pods/writer") is None, "the pod to go"
    )
    run_pod(namespace, name="reader", **volume, **mount)
    result = kube_cluster.exec(namespace, "reader", ["cat", "/data/file"])
    assert (result.returncode, result.stdout) == (0, "kept\n")

    # the claim deleted, its volume is Released: the provisioner removes it and its directory
    kube_cluster.api.delete(f"/api/v1/namespaces/{namespace}/pods/reader")
    kube_cluster.api.delete(f"{claims}/data")
    kube_cluster.wait_for(
        lambda: (
            kube_cluster.api.get(f"/api/v1/persistentvolumes/{pv['metadata']['name']}") is None
            and not Path(pv["spec"]["local"]["path"]).exists()
        ),
        "the released volume and its directory to go",
    )


def test_a_non_root_pod_with_an_fs_group_can_write_to_its_claim(
    kube_cluster: KubeCluster, run_pod: RunPod
) -> None:
    """A login pod's home: Pod Security restricted, uid 10001, fsGroup, a claim of the local class."""
    namespace = kube_cluster.new_namespace("home", pod_security="restricted")
    try:
        kube_cluster.api.create(
            f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
            {
                "metadata": {"name": "home"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}},
            },
        )
        security = {
            **RESTRICTED["securityContext"],
            "fsGroup": 10001,
            "fsGroupChangePolicy": "OnRootMismatch",
        }
        run_pod(
            namespace,
            name="user",
            securityContext=security,
            container={
                "securityContext": CONTAINER_SECURITY,
                "volumeMounts": [{"name": "home", "mountPath": "/home/user"}],
            },
            volumes=[{"name": "home", "persistentVolumeClaim": {"claimName": "home"}}],
        )
        result = kube_cluster.exec(
            namespace, "user", ["sh", "-c", "touch /home/user/x && ls -ln /home/user/x"]
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.split()[2:4] == ["10001", "10001"]
    finally:
        kube_cluster.api.delete(f"/api/v1/namespaces/{namespace}")


def _web(kube_cluster: KubeCluster, namespace: str, run_pod: RunPod) -> tuple[str, str]:
    """An httpd pod behind a ClusterIP Service: (pod IP, ClusterIP)."""
    pod = run_pod(namespace, ["httpd", "-f", "-p", "8080", "-h", "/www"], name="web", labels={"app": "web"})
    service = kube_cluster.api.create(
        f"/api/v1/namespaces/{namespace}/services",
        {
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    )
    return str(pod["status"]["podIP"]), str(service["spec"]["clusterIP"])


def _fetch_from(kube_cluster: KubeCluster, namespace: str, pod: str, address: str, port: int) -> str | None:
    """The body of `GET /` from inside the pod, or None when it cannot connect. (busybox's `nc`:
    Debian's static busybox `wget` crashes in its name lookup, even for an IP address.)"""
    request = f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 {address} {port}"
    result = kube_cluster.exec(namespace, pod, ["sh", "-c", request], timeout=20)
    if result.returncode != 0 or "\n\n" not in result.stdout:  # (text mode: \r\n read as \n)
        return None
    return result.stdout.split("\n\n", 1)[1]


def test_a_service_reaches_its_pod_from_the_host_and_from_a_pod(
    kube_cluster: KubeCluster, namespace: str, run_pod: RunPod
) -> None:
    _pod_ip, cluster_ip = _web(kube_cluster, namespace, run_pod)
    assert cluster_ip.startswith("10.96.")

    def from_host() -> str | None:
        response = httpx.get(f"http://{cluster_ip}/", timeout=2)
        return response.text if response.status_code == 200 else None

    # kube-proxy needs a moment to program a new Service
    assert kube_cluster.wait_for(from_host, "the Service from the host", 30) == "hello from the test pod\n"
    run_pod(namespace, name="client")
    assert (
        kube_cluster.wait_for(
            lambda: _fetch_from(kube_cluster, namespace, "client", cluster_ip, 80),
            "the Service from a pod",
            30,
        )
        == "hello from the test pod\n"
    )


def test_a_pod_finds_a_service_by_its_name_through_the_cluster_dns(
    kube_cluster: KubeCluster, namespace: str, run_pod: RunPod
) -> None:
    """CoreDNS answers pods for Services (`NAME.NAMESPACE.svc`, as the SSH gateway finds login pods)
    and forwards other names to the host's resolvers."""
    _pod_ip, cluster_ip = _web(kube_cluster, namespace, run_pod)
    run_pod(namespace, name="client")
    resolv = kube_cluster.exec(namespace, "client", ["cat", "/etc/resolv.conf"]).stdout
    assert f"nameserver {kube_cluster.node_ip}" in resolv
    assert f"search {namespace}.svc.cluster.local svc.cluster.local cluster.local" in resolv

    looked_up = kube_cluster.exec(namespace, "client", ["nslookup", f"web.{namespace}.svc.cluster.local"])
    assert looked_up.returncode == 0, looked_up.stdout + looked_up.stderr
    assert f"Address: {cluster_ip}" in looked_up.stdout
    fetched = kube_cluster.wait_for(
        lambda: _fetch_from(kube_cluster, namespace, "client", f"web.{namespace}.svc", 80),
        "the Service by its short name from a pod",
        30,
    )
    assert fetched == "hello from the test pod\n"
    unknown = kube_cluster.exec(namespace, "client", ["nslookup", f"nothing.{namespace}.svc.cluster.local"])
    assert unknown.returncode != 0 and cluster_ip not in unknown.stdout


def test_network_policy_is_enforced(kube_cluster: KubeCluster, namespace: str, run_pod: RunPod) -> None:
    pod_ip, _cluster_ip = _web(kube_cluster, namespace, run_pod)
    run_pod(namespace, name="friend", labels={"role": "friend"})
    run_pod(namespace, name="stranger")
    for client in ("friend", "stranger"):
        assert _fetch_from(kube_cluster, namespace, client, pod_ip, 8080) == "hello from the test pod\n"

    policies = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies"
    kube_cluster.api.create(
        policies, {"metadata": {"name": "deny"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
    )
    kube_cluster.wait_for(
        lambda: _fetch_from(kube_cluster, namespace, "friend", pod_ip, 8080) is None,
        "default-deny to block",
        30,
    )

    kube_cluster.api.create(
        policies,
        {
            "metadata": {"name": "allow-friend"},
            "spec": {
                "podSelector": {"matchLabels": {"app": "web"}},
                "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "friend"}}}]}],
            },
        },
    )
    kube_cluster.wait_for(
        lambda: _fetch_from(kube_cluster, namespace, "friend", pod_ip, 8080),
        "the allow rule to let it in",
        30,
    )
    assert _fetch_from(kube_cluster, namespace, "stranger", pod_ip, 8080) is None


def test_a_restricted_namespace_admits_a_non_root_pod_and_refuses_a_root_one(
    kube_cluster: KubeCluster, run_pod: RunPod, busybox_image: str
) -> None:
    namespace = kube_cluster.new_namespace("restricted", pod_security="restricted")
    try:
        run_pod(namespace, name="user", **RESTRICTED)
        result = kube_cluster.exec(namespace, "user", ["id", "-u"])
        assert (result.returncode, result.stdout.strip()) == (0, "10001")

        with pytest.raises(ApiError) as refused:
            kube_cluster.api.create(
                f"/api/v1/namespaces/{namespace}/pods", pod_manifest("root", busybox_image, ["sleep", "60"])
            )
        assert refused.value.status == 403
        assert 'violates PodSecurity "restricted' in refused.value.message
    finally:
        kube_cluster.api.delete(f"/api/v1/namespaces/{namespace}")


def test_a_pod_reaches_the_api_server_through_the_kubernetes_service(
    kube_cluster: KubeCluster, namespace: str, run_pod: RunPod
) -> None:
    """What SUP's own pod (the chart) needs: 10.96.0.1:443 leads to kube-apiserver."""
    run_pod(namespace, name="client")
    answer = kube_cluster.wait_for(
        lambda: _fetch_from(kube_cluster, namespace, "client", KUBERNETES_SERVICE_IP, 443),
        "the kubernetes Service from a pod",
        30,
    )
    assert "Client sent an HTTP request to an HTTPS server" in answer


def test_a_pod_reaches_a_service_of_the_host_at_the_pod_gateway(
    kube_cluster: KubeCluster, namespace: str, run_pod: RunPod
) -> None:
    """What slurmctld (listening on the host's 0.0.0.0) needs: pods reach the host at pod_gateway."""
    with socket.socket() as server:
        server.bind(("0.0.0.0", 0))
        server.listen()
        port = server.getsockname()[1]

        def answer() -> None:
            connection, _ = server.accept()
            with connection:
                connection.sendall(b"hello from the host\n")

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        run_pod(namespace, name="client")
        result = kube_cluster.exec(
            namespace, "client", ["nc", "-w", "3", kube_cluster.pod_gateway, str(port)]
        )
        thread.join(timeout=5)
    assert (result.returncode, result.stdout) == (0, "hello from the host\n")


def test_a_changed_config_map_reaches_the_running_pod(
    kube_cluster: KubeCluster, namespace: str, run_pod: RunPod
) -> None:
    """Mounted ConfigMaps follow updates without a restart, within the kubelet's syncFrequency
    (10 s) plus its jitter: how login keys and NSS maps reach running login pods."""
    maps = f"/api/v1/namespaces/{namespace}/configmaps"
    kube_cluster.api.create(maps, {"metadata": {"name": "keys"}, "data": {"alice.keys": "old\n"}})
    run_pod(
        namespace,
        name="login",
        volumes=[{"name": "keys", "configMap": {"name": "keys"}}],
        container={"volumeMounts": [{"name": "keys", "mountPath": "/etc/sup/login", "readOnly": True}]},
    )
    assert kube_cluster.exec(namespace, "login", ["cat", "/etc/sup/login/alice.keys"]).stdout == "old\n"

    begin = time.monotonic()
    kube_cluster.api.merge_patch(f"{maps}/keys", {"data": {"alice.keys": "new\n"}})
    kube_cluster.wait_for(
        lambda: kube_cluster.exec(namespace, "login", ["cat", "/etc/sup/login/alice.keys"]).stdout == "new\n",
        "the update in the pod",
        timeout=40,
        interval=1,
    )
    took = time.monotonic() - begin
    assert took < 25, f"the update took {took:.1f} s"
    print(f"ConfigMap update reached the pod in {took:.1f} s")
