"""SUP runs under the chart's ServiceAccount and Role, and that Role is exactly what it needs: a
whole lifecycle succeeds with a token of that ServiceAccount, every (verb, resource) the Role grants
is one SUP used, and anything else is forbidden; in particular nothing in the release's namespace,
where SUP's own Secrets are. (That a list the API server refuses midway plans and deletes nothing is
in test_contract.py, as for every target.)"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sup.targets.kube import watch
from tests.kube.site import Site
from tests.kube.stuck import login_pod, stuck_rollout
from tests.support.helm import apply_objects, render
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


def _status(attempt: Callable[[], object]) -> int:
    try:
        attempt()
    except ApiError as exc:
        return exc.status
    return 200


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
    with site.admin() as admin:  # kim's pod crash-loops on the old template: SUP replaces it
        stuck_rollout(admin, site, "login-kim")
        login_pod(admin, site, "login-kim", "crashloop")
    site.converge()
    assert site.get("pods", "login-kim-0") is None
    with site.admin() as admin:  # labels removed by hand: SUP re-reads those objects (get)
        for kind, name in [("pvc", site.home("kim")), ("workload", "login-kim"), ("service", "login-kim"),
                           ("network_policy", "group-physics"), ("login_config", "login-saul")]:  # fmt: skip
            admin.json_patch(
                site.path(kind, name),
                [{"op": "remove", "path": "/metadata/labels/app.kubernetes.io~1managed-by"}],
            )
    site.converge()
    site.update_user("saul", active=False)
    site.converge()  # deletes the pod, marks the home
    site.now += datetime.timedelta(days=2)
    site.converge()  # deletes the home
    assert site.home("saul") not in site.live_names("pvc")

    used: set[tuple[str, str]] = set()
    for target in site.targets:
        used |= set(target.client.requests)
        assert target.client.warnings == []
    for cache in watch.caches():  # the watches, and any relist, run on the cache's own client
        used |= set(cache.requests())
    assert used == _granted(role)  # everything granted is used; nothing used is missing (it passed)
    assert {r for rule in role["rules"] for r in rule["resources"]} == {
        "persistentvolumeclaims",
        "services",
        "statefulsets",
        "networkpolicies",
        "configmaps",
        "pods",
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
    with kubeapi.as_token(token) as sup:
        assert _status(lambda: sup.items(collection(site.namespace, "persistentvolumeclaims"))) == 200
        forbidden = {
            "read a pod": lambda: sup.get(f"{collection(site.namespace, 'pods')}/p"),
            "list pods elsewhere": lambda: sup.items(collection(other, "pods")),
            "list secrets": lambda: sup.items(collection(site.namespace, "secrets")),
            "list configmaps elsewhere": lambda: sup.items(collection(other, "configmaps")),
            "create a pod": lambda: sup.create(collection(site.namespace, "pods"), pod),
            "list claims elsewhere": lambda: sup.items(collection(other, "persistentvolumeclaims")),
            "create a claim elsewhere": lambda: sup.create(
                collection(other, "persistentvolumeclaims"), claim
            ),
            "list claims cluster-wide": lambda: sup.items("/api/v1/persistentvolumeclaims"),
            "create a role": lambda: sup.create(collection(site.namespace, "roles"), role),
            "delete the namespace": lambda: sup.delete(f"/api/v1/namespaces/{site.namespace}"),
            "watch pods": lambda: sup.items(
                f"{collection(site.namespace, 'pods')}?watch=true&timeoutSeconds=1"
            ),
            "watch elsewhere": lambda: sup.items(
                f"{collection(other, 'statefulsets')}?watch=true&timeoutSeconds=1"
            ),
        }
        refused = {what: _status(attempt) for what, attempt in forbidden.items()}
    assert refused == dict.fromkeys(forbidden, 403)


def test_by_default_the_service_account_can_touch_nothing_in_the_release_namespace(
    kubeapi: KubeApiServer, helm_binary: str
) -> None:
    """The chart with its defaults, installed as Helm would: SUP's ServiceAccount can create a
    StatefulSet (and so a pod that mounts any Secret beside it) only in the namespace the chart made
    for the login pods, never in the release's, which holds the database URL and the LDAP and
    Keycloak credentials."""
    release_namespace = kubeapi.new_namespace("sup-system")
    release = f"sup-{uuid.uuid4().hex[:8]}"
    objects = render(helm_binary, release_namespace, release=release)
    rbac = [o for o in objects if o["kind"] in ("Namespace", "ServiceAccount", "Role", "RoleBinding")]
    secret = {"metadata": {"name": "sup-database"}, "stringData": {"url": "postgresql://sup:pw@db/sup"}}
    with kubeapi.admin() as admin:
        apply_objects(admin, rbac, release_namespace)
        admin.create(collection(release_namespace, "secrets"), secret)
    (account,) = [o for o in rbac if o["kind"] == "ServiceAccount"]
    token = kubeapi.service_account_token(release_namespace, account["metadata"]["name"])
    users = f"{release}-users"

    def statefulset(name: str) -> dict[str, Any]:
        pod = {  # a pod that mounts SUP's database Secret
            "metadata": {"labels": {"app": name}},
            "spec": {
                "containers": [
                    {"name": "c", "image": "i", "volumeMounts": [{"name": "s", "mountPath": "/s"}]}
                ],
                "volumes": [{"name": "s", "secret": {"secretName": "sup-database"}}],
            },
        }
        return {
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": pod},
        }

    claim = {
        "metadata": {"name": "home-x"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    with kubeapi.as_token(token) as sup:
        in_release = {
            "create a statefulset": lambda: sup.create(
                collection(release_namespace, "statefulsets"), statefulset("steal")
            ),
            "create a pod": lambda: sup.create(collection(release_namespace, "pods"), pod),
            "create a claim": lambda: sup.create(
                collection(release_namespace, "persistentvolumeclaims"), claim
            ),
            "read the secret": lambda: sup.get(f"{collection(release_namespace, 'secrets')}/sup-database"),
            "list secrets": lambda: sup.items(collection(release_namespace, "secrets")),
            "list statefulsets": lambda: sup.items(collection(release_namespace, "statefulsets")),
            "create a role": lambda: sup.create(
                collection(release_namespace, "roles"), {"metadata": {"name": "more"}, "rules": []}
            ),
        }
        refused = {what: _status(attempt) for what, attempt in in_release.items()}
        assert refused == dict.fromkeys(in_release, 403)
        # where it provisions, it can (what the Kubernetes target does), though not read Secrets
        created = sup.create(collection(users, "statefulsets"), statefulset("login-x"))
        assert created["metadata"]["namespace"] == users
        assert sup.create(collection(users, "persistentvolumeclaims"), claim)["metadata"]["name"] == "home-x"
        assert _status(lambda: sup.items(collection(users, "secrets"))) == 403
        assert _status(lambda: sup.merge_patch(f"/api/v1/namespaces/{users}", {"metadata": {"labels": {
            "pod-security.kubernetes.io/enforce": "privileged"}}})) == 403  # fmt: skip
