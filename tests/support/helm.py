"""helm for the chart tests: built from the Go module proxy and cached by scripts/build-helm (run by
scripts/test before pytest, as for kube-apiserver)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.kubeapi import Admin, collection

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "sup"


class HelmUnavailable(RuntimeError):
    pass


def find_helm() -> str:
    override = os.environ.get("SUP_HELM")
    if override:
        return override
    result = subprocess.run(
        [str(REPO / "scripts" / "build-helm"), "--cached-only"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0 or not result.stdout.strip():
        raise HelmUnavailable("helm is not built yet: run scripts/build-helm (scripts/test does it)")
    return result.stdout.strip().splitlines()[-1]


def helm(binary: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HELM_CACHE_HOME": "/tmp/sup-helm/cache", "HELM_CONFIG_HOME": "/tmp/sup-helm/config",
           "HELM_DATA_HOME": "/tmp/sup-helm/data"}  # fmt: skip
    return subprocess.run(
        [binary, *args], capture_output=True, text=True, timeout=timeout, check=False, env=env
    )


def render(binary: str, namespace: str, *settings: str, release: str = "sup") -> list[dict[str, Any]]:
    """`helm template` of the chart: its objects, in order."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    for setting in settings:
        args += ["--set", setting]
    result = helm(binary, *args)
    if result.returncode != 0:
        raise AssertionError(f"helm template failed: {result.stderr}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


# the kinds the chart renders (monitoring's CRD-backed kinds aside), by their API path's plural
PLURAL = {
    "Namespace": "namespaces",
    "ServiceAccount": "serviceaccounts",
    "ConfigMap": "configmaps",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "Service": "services",
    "Deployment": "deployments",
    "Job": "jobs",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "Pod": "pods",  # the `helm test` hook
}


# the cluster-scoped kinds it renders, by their collection's path
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
CLUSTER_SCOPED = {
    "Namespace": "/api/v1/namespaces",
    "ValidatingAdmissionPolicy": f"{ADMISSION}/validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": f"{ADMISSION}/validatingadmissionpolicybindings",
}


def apply_objects(admin: Admin, objects: list[dict[str, Any]], namespace: str) -> None:
    """Server-side apply the rendered objects as `helm install -n namespace` would create them."""
    for item in objects:
        name = item["metadata"]["name"]
        if item["kind"] in CLUSTER_SCOPED:
            admin.apply(f"{CLUSTER_SCOPED[item['kind']]}/{name}", item, manager="helm-test")
            continue
        target = item["metadata"].get("namespace", namespace)
        admin.apply(f"{collection(target, PLURAL[item['kind']])}/{name}", item, manager="helm-test")
