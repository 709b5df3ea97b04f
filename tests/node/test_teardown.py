"""The test cluster's teardown puts the host back as it was. This test stops the session's own cluster
(after it ran every other test: the `kube_teardown` marker moves it to the end of the run), with
pods, a volume, a Service and a NetworkPolicy still in place."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.node.conftest import RunPod
from tests.support import hoststate
from tests.support.kubenode import KubeCluster
from tests.support.kubenode_config import BRIDGE


def _pids_in_cgroups(paths: set[str]) -> set[int]:
    pids: set[int] = set()
    for path in paths:
        for procs in Path(path).rglob("cgroup.procs"):
            pids.update(int(line) for line in procs.read_text().split())
    return pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


@pytest.mark.kube_teardown
def test_stopping_the_cluster_leaves_the_host_as_it_was(
    kube_cluster: KubeCluster, namespace: str, run_pod: RunPod
) -> None:
    before = kube_cluster._snapshot
    assert before is not None
    # something to clean up: a pod with a claim, a Service, a NetworkPolicy (kube-router's chains)
    kube_cluster.api.create(
        f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
        {
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}},
        },
    )
    run_pod(
        namespace,
        ["httpd", "-f", "-p", "8080", "-h", "/www"],
        name="web",
        labels={"app": "web"},
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        container={"volumeMounts": [{"name": "data", "mountPath": "/data"}]},
    )
    kube_cluster.api.create(
        f"/api/v1/namespaces/{namespace}/services",
        {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}},
    )
    kube_cluster.api.create(
        f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies",
        {"metadata": {"name": "deny"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}},
    )
    kube_cluster.wait_for(
        lambda: (
            any(chain.endswith(":KUBE-ROUTER-FORWARD") for chain in hoststate.chains())
            and hoststate.mounts_under(kube_cluster.root)
        ),
        "kube-router's chains and the pod's mounts",
    )
    processes = [process.pid for process in kube_cluster.processes.values()]
    processes += [process.pid for process in kube_cluster.apiserver.processes]
    in_pods = _pids_in_cgroups(hoststate.cgroups())
    assert in_pods, "the pod's processes are in the kubepods cgroups"
    assert BRIDGE in hoststate.links()

    begin = time.monotonic()
    left = kube_cluster.stop()
    took = time.monotonic() - begin

    assert left == []
    assert [pid for pid in processes + sorted(in_pods) if _alive(pid)] == []
    assert hoststate.mounts_under(kube_cluster.root) == []
    assert not kube_cluster.root.exists()
    assert {chain for chain in hoststate.chains() if ":KUBE-" in chain} == {
        chain for chain in before.chains if ":KUBE-" in chain
    }
    assert hoststate.ipsets() == before.ipsets
    assert BRIDGE not in hoststate.links()
    assert hoststate.netns() == before.netns
    assert hoststate.cgroups() == before.cgroups
    assert hoststate.read_sysctls() == before.sysctls
    assert hoststate.stray_dirs() == before.stray_dirs
    assert took < 30, f"teardown took {took:.1f} s"
    print(f"teardown took {took:.1f} s")
