"""SUP runs under the chart's ServiceAccount and Role, and that Role is exactly what it needs: a
whole lifecycle succeeds with a token of that ServiceAccount, every (verb, resource) the Role grants
is one SUP used, and anything else is forbidden. (That a list the API server refuses midway plans and
deletes nothing is in test_contract.py, as for every target.)"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.kube.site import Site
from tests.kube.test_chart import apply_objects
from tests.support.helm import render
from tests.support.kubeapi import ApiError, KubeApiServer, collection


def _install_rbac(
    kubeapi: KubeApiServer, helm: str, target: str, tmp_path: Path, **role_change: Any
) -> tuple[Path, dict[str, Any]]:
    """The chart's ServiceAccount, Role and RoleBinding in the API server (SUP in its own namespace,
    the objects in `target`); returns a kubeconfig with a token of that ServiceAccount, and the Role."""
    release = kubeapi.new_namespace("sup-system")
    objects = render(helm, release, f"kube.namespace={target}")
    rbac = [o for o in objects if o["kind"] in ("ServiceAccount", "Role", "RoleBinding")]
    (role,) = [o for o in rbac if o["kind"] == "Role"]
    if role_change:
        role.update(role_change)
    with kubeapi.admin() as admin:
        apply_objects(admin, rbac, release)
    (account,) = [o for o in rbac if o["kind"] == "ServiceAccount"]
    token = kubeapi.service_account_token(release, account["metadata"]["name"])
    return kubeapi.write_kubeconfig(tmp_path / f"{target}.kubeconfig", token=token), role


def _granted(role: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (verb, resource) for rule in role["rules"] for resource in rule["resources"] for verb in rule["verbs"]
    }


def test_a_whole_lifecycle_runs_under_the_charts_role_and_uses_all_of_it(
    make_site: Callable[..., Site],
    kubeapi: KubeApiServer,
    helm_binary: str,
    tmp_path: Path,
) -> None:
    site = make_site(pod_security="baseline", group_pods=["physics"], pvc_retention="1d")
    kubeconfig, role = _install_rbac(kubeapi, helm_binary, site.namespace, tmp_path)
    site.with_kube(kubeconfig=str(kubeconfig))
    site.now = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)

    site.add_user("kim")
    site.add_user("saul")
    site.add_group("physics", members=["kim", "saul"])
    site.converge()  # creates
    assert "login-kim" in site.names("workload")
    site.with_kube(image="login:2")
    site.converge()  # updates
    with site.admin() as admin:  # labels removed by hand: SUP re-reads those objects (get)
        for kind, name in [("pvc", "home-kim"), ("workload", "login-kim"), ("service", "login-kim"),
                           ("network_policy", "group-physics")]:  # fmt: skip
            admin.json_patch(
                site.path(kind, name),
                [{"op": "remove", "path": "/metadata/labels/app.kubernetes.io~1managed-by"}],
            )
    site.converge()
    site.update_user("saul", active=False)
    site.converge()  # deletes the pod, marks the home
    site.now += datetime.timedelta(days=2)
    site.converge()  # deletes the home
    assert "home-saul" not in site.live_names("pvc")

    used: set[tuple[str, str]] = set()
    for target in site.targets:
        used |= set(target.client.requests)
        assert target.client.warnings == []
    assert used == _granted(role)  # everything granted is used; nothing used is missing (it passed)
    assert {r for rule in role["rules"] for r in rule["resources"]} == {
        "persistentvolumeclaims",
        "services",
        "statefulsets",
        "networkpolicies",
    }


def test_anything_outside_the_role_is_forbidden(
    make_site: Callable[..., Site],
    kubeapi: KubeApiServer,
    helm_binary: str,
    tmp_path: Path,
) -> None:
    site = make_site()
    kubeconfig, _ = _install_rbac(kubeapi, helm_binary, site.namespace, tmp_path)
    token = kubeconfig.read_text().split("token: ")[1].split()[0]
    other = kubeapi.new_namespace("other")
    claim = {
        "metadata": {"name": "x"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    role = {"metadata": {"name": "more"}, "rules": []}
    statefulsets = collection(site.namespace, "statefulsets")
    with kubeapi.as_token(token) as sup:

        def status(attempt: Callable[[], object]) -> int:
            try:
                attempt()
            except ApiError as exc:
                return exc.status
            return 200

        assert status(lambda: sup.items(collection(site.namespace, "persistentvolumeclaims"))) == 200
        forbidden = {
            "list pods": lambda: sup.items(collection(site.namespace, "pods")),
            "list secrets": lambda: sup.items(collection(site.namespace, "secrets")),
            "list configmaps": lambda: sup.items(collection(site.namespace, "configmaps")),
            "create a pod": lambda: sup.create(collection(site.namespace, "pods"), pod),
            "list claims elsewhere": lambda: sup.items(collection(other, "persistentvolumeclaims")),
            "create a claim elsewhere": lambda: sup.create(
                collection(other, "persistentvolumeclaims"), claim
            ),
            "list claims cluster-wide": lambda: sup.items("/api/v1/persistentvolumeclaims"),
            "create a role": lambda: sup.create(collection(site.namespace, "roles"), role),
            "delete the namespace": lambda: sup.delete(f"/api/v1/namespaces/{site.namespace}"),
            "watch": lambda: sup.items(f"{statefulsets}?watch=true&timeoutSeconds=1"),
        }
        refused = {what: status(attempt) for what, attempt in forbidden.items()}
    assert refused == dict.fromkeys(forbidden, 403)
