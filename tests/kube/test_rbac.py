"""SUP runs under the chart's ServiceAccount and Role, and that Role is exactly what it needs: a
whole lifecycle succeeds with a token of that ServiceAccount, every (verb, resource) the Role grants
is one SUP used, and anything else is forbidden; in particular nothing in the release's namespace,
where SUP's own Secrets are. (That a list the API server refuses midway plans and deletes nothing is
in test_contract.py, as for every target.)"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sup.targets.kube import watch
from tests.kube.site import Site
from tests.kube.stuck import login_pod, stuck_rollout
from tests.support.helm import apply_objects, render
from tests.support.kubeapi import ApiError, KubeApiServer, collection

POLICY = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def _install_rbac(
    kubeapi: KubeApiServer,
    helm: str,
    target: str,
    tmp_path: Path,
    *settings: str,
    **role_change: Any,
) -> tuple[Path, dict[str, Any]]:
    """The chart's ServiceAccount, Role and RoleBinding, and its admission policy on Services, in the
    API server (SUP in its own namespace, the objects in `target`); returns a kubeconfig with a token
    of that ServiceAccount, and the Role."""
    release = kubeapi.new_namespace("sup-system")
    objects = render(helm, release, f"kube.namespace={target}", *settings)
    rbac = [o for o in objects if o["kind"] in ("ServiceAccount", "Role", "RoleBinding", *POLICY)]
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


def _service(name: str, kind: str = "ClusterIP", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "type": kind,
            "selector": {"app": name},
            "ports": [{"port": 22, "targetPort": 2222}],
            **spec,
        },
    }


def _policy_live(sup: Any, namespace: str) -> None:
    """Until the API server enforces the policy just created (its informer and type check take a
    moment): a dry-run NodePort Service by SUP, refused once it does. A guard against a hang."""
    deadline = time.monotonic() + 60
    while (
        _status(
            lambda: sup.create(collection(namespace, "services"), _service("probe", "NodePort"), dryRun="All")
        )
        != 403
    ):
        assert time.monotonic() < deadline, "the chart's Service policy never refused SUP a NodePort Service"
        time.sleep(0.2)


def test_sup_may_create_only_the_service_types_the_site_configured(
    kubeapi: KubeApiServer, helm_binary: str, tmp_path: Path
) -> None:
    """SUP's Role must create and patch the login pods' Services, and RBAC cannot see a Service's
    type: the chart's ValidatingAdmissionPolicy refuses SUP's ServiceAccount (and only it) any type
    but ClusterIP and kube.settings.service_type, and externalIPs whatever the settings."""
    target = kubeapi.new_namespace("users")
    kubeconfig, _ = _install_rbac(kubeapi, helm_binary, target, tmp_path)
    token = kubeconfig.read_text().split("token: ")[1].split()[0]
    services = collection(target, "services")
    with kubeapi.as_token(token) as sup:
        _policy_live(sup, target)
        assert sup.create(services, _service("login-a"))["spec"]["type"] == "ClusterIP"
        headless = sup.create(services, _service("login-h", clusterIP="None"))["spec"]  # what SUP makes
        assert (headless["type"], headless["clusterIP"]) == ("ClusterIP", "None")
        refused: dict[str, int] = {}
        messages: list[str] = []
        for what, body in {
            "a NodePort": _service("np", "NodePort"),
            "a LoadBalancer": _service("lb", "LoadBalancer"),
            "externalIPs": _service("ext", externalIPs=["203.0.113.9"]),
            "an ExternalName": {
                "metadata": {"name": "en"},
                "spec": {"type": "ExternalName", "externalName": "x.example"},
            },
        }.items():
            try:
                sup.create(services, body)
                refused[what] = 201
            except ApiError as exc:
                refused[what] = exc.status
                messages.append(exc.message)
        assert refused == dict.fromkeys(refused, 403)
        assert "SUP may not give a Service externalIPs" in " ".join(messages)
        assert "SUP may create Services of type ClusterIP only" in " ".join(messages)
        # nor turn the one it made into one (an update is checked as a create)
        assert (
            _status(lambda: sup.merge_patch(f"{services}/login-a", {"spec": {"type": "LoadBalancer"}})) == 403
        )
        assert (
            _status(
                lambda: sup.merge_patch(f"{services}/login-a", {"spec": {"externalIPs": ["203.0.113.9"]}})
            )
            == 403
        )
    with kubeapi.admin() as admin:  # anyone else is not matched: the site's own NodePort Services
        assert admin.create(services, _service("site-np", "NodePort"))["spec"]["type"] == "NodePort"
        assert admin.get(f"{services}/np") is None and admin.get(f"{services}/lb") is None

    # a site whose login Services are NodePorts (kube.settings.service_type): those, never the rest
    target = kubeapi.new_namespace("users")
    kubeconfig, _ = _install_rbac(
        kubeapi, helm_binary, target, tmp_path, "kube.settings.service_type=NodePort"
    )
    token = kubeconfig.read_text().split("token: ")[1].split()[0]
    services = collection(target, "services")
    with kubeapi.as_token(token) as sup:
        deadline = time.monotonic() + 60  # the policy is live once it refuses a LoadBalancer
        while _status(lambda: sup.create(services, _service("probe", "LoadBalancer"), dryRun="All")) != 403:
            assert time.monotonic() < deadline, "the chart's Service policy never refused SUP a LoadBalancer"
            time.sleep(0.2)
        assert sup.create(services, _service("login-b", "NodePort"))["spec"]["type"] == "NodePort"
        assert sup.create(services, _service("login-c", clusterIP="None"))["spec"]["clusterIP"] == "None"
        assert (
            _status(lambda: sup.create(services, _service("ext", "NodePort", externalIPs=["203.0.113.9"])))
            == 403
        )
