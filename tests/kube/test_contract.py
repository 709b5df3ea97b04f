"""The Kubernetes target holds to the target contract (tests/support/target_contract.py)."""

from __future__ import annotations

from typing import Any

from tests.kube.site import Site
from tests.support.kubeapi import collection
from tests.support.target_contract import TargetContract

DRIFTED_IMAGE = "evil:latest"
VERBS = ["get", "list", "create", "patch", "delete"]


def _image(site: Site, workload: str) -> str | None:
    sts = site.get("workload", workload)
    return None if sts is None else str(sts["spec"]["template"]["spec"]["containers"][0]["image"])


class TestKubeContract(TargetContract[Site]):
    read_error = ("networkpolicies", "forbidden")

    def holds(self, site: Site, username: str) -> bool:
        return f"login-{username}" in site.names("workload")

    def snapshot(self, site: Site) -> object:
        return site.versions()

    def make_drift(self, site: Site) -> set[tuple[str, str, str]]:
        with site.admin() as admin:
            admin.merge_patch(
                site.path("workload", "login-kim"),
                {"spec": {"template": {"spec": {"containers": [{"name": "sshd", "image": DRIFTED_IMAGE}]}}}},
                fieldManager="kubectl-edit",
            )
            admin.delete(site.path("service", "login-saul"))
        return {("update", "workload", "login-kim"), ("create", "service", "login-saul")}

    def drift_repaired(self, site: Site) -> bool:
        assert site.settings.kube is not None
        return _image(site, "login-kim") == site.settings.kube.image and "login-saul" in site.names("service")

    def add_foreign(self, site: Site) -> None:
        """A claim and a workload somebody made, and a policy that carries SUP's label by hand."""
        claim: dict[str, Any] = {
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }
        container = {"name": "app", "image": "app:1", "securityContext": {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
            "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}}  # fmt: skip
        workload = {
            "metadata": {"name": "app", "labels": {"app": "app"}},
            "spec": {
                "selector": {"matchLabels": {"app": "app"}},
                "template": {"metadata": {"labels": {"app": "app"}}, "spec": {"containers": [container]}},
            },
        }
        labelled = {
            "metadata": {"name": "login-zed", "labels": {"app.kubernetes.io/managed-by": "sup"}},
            "spec": {"podSelector": {}},
        }
        with site.admin() as admin:
            admin.create(site.path("pvc"), claim)
            admin.create(site.path("workload"), workload)
            admin.create(site.path("network_policy"), labelled)

    def foreign(self, site: Site) -> object:
        theirs = {("pvc", "data"), ("workload", "app"), ("network_policy", "login-zed")}
        return {key: version for key, version in site.versions().items() if key in theirs}

    def break_read(self, site: Site) -> None:
        """SUP's account may do everything it needs but list NetworkPolicies: the API server refuses
        that list, after the other kinds were read."""
        rules = [
            {"apiGroups": [""], "resources": ["persistentvolumeclaims", "services"], "verbs": VERBS},
            {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": VERBS},
            {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
             "verbs": [v for v in VERBS if v != "list"]},
        ]  # fmt: skip
        binding = {
            "metadata": {"name": "sup"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "sup"},
            "subjects": [{"kind": "ServiceAccount", "name": "sup", "namespace": site.namespace}],
        }
        with site.admin() as admin:
            admin.create(collection(site.namespace, "roles"), {"metadata": {"name": "sup"}, "rules": rules})
            admin.create(collection(site.namespace, "rolebindings"), binding)
        token = site.server.service_account_token(site.namespace, "sup")
        path = site.kubeconfig.with_name(f"{site.namespace}.kubeconfig")
        site.with_kube(kubeconfig=str(site.server.write_kubeconfig(path, token=token)))
