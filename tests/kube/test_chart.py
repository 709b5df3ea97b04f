"""SUP's Helm chart: `helm lint` and `helm template`, the settings it renders load in SUP, and the
rendered objects are accepted by a real API server in a namespace that enforces Pod Security
`restricted` (SUP's own pods, the server's and the migration Job's, are admitted). SUP provisions
into a namespace of its own, never the release's, which holds SUP's Secrets (issue 15)."""

from __future__ import annotations

import re
import subprocess
import tomllib
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from sup.config import Settings
from sup.targets.kube.names import Owner
from tests.support.helm import CHART, apply_objects, helm, render
from tests.support.kubeapi import ApiError, KubeApiServer, collection

REPO = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def _by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objects}


def test_helm_lint_passes(helm_binary: str) -> None:
    shared = ["--set", "kube.settings.home_mode=shared", "--set", "kube.settings.shared_home_claim=homes"]
    for settings in ([], ["--set", "gateway.enabled=true"], shared, [*shared, "--set", "homes.quota=xfs"]):
        result = helm(helm_binary, "lint", "--strict", str(CHART), *settings)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_scim_oauth_client_secrets_come_from_secrets_by_connection(helm_binary: str) -> None:
    """Each introspecting SCIM connection's client secret reaches SUP as the variable its settings
    read (SUP_SCIM__OAUTH__NAME__CLIENT_SECRET), never inline; a name no variable can carry is refused."""
    ref = "secrets.scimOAuthClientSecrets.okta_corp"
    objects = render(helm_binary, "sup-system", f"{ref}.name=sup-scim-okta", f"{ref}.key=client_secret")
    (container,) = _by_kind(objects)["Deployment"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["SUP_SCIM__OAUTH__OKTA_CORP__CLIENT_SECRET"] == {
        "name": "SUP_SCIM__OAUTH__OKTA_CORP__CLIENT_SECRET",
        "valueFrom": {"secretKeyRef": {"name": "sup-scim-okta", "key": "client_secret"}},
    }
    bad = "secrets.scimOAuthClientSecrets.okta-corp"
    with pytest.raises(AssertionError, match="okta-corp"):
        render(helm_binary, "sup-system", f"{bad}.name=sup-scim-okta", f"{bad}.key=client_secret")


def test_the_ssh_ca_key_is_mounted_into_sups_container_only(helm_binary: str) -> None:
    """The CA's private key (issue 29): a read-only file in SUP's own container, named to SUP by
    SUP_SSH_CA__KEY_FILE; no other container or pod of the chart mounts it."""
    objects = render(helm_binary, "sup-system", "secrets.sshCaKey.name=sup-ssh-ca", "gateway.enabled=true")
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    assert len(deployments) == 2  # SUP's and the gateway's
    (pod,) = [
        d["spec"]["template"]["spec"] for d in deployments
        if [c["name"] for c in d["spec"]["template"]["spec"]["containers"]] == ["sup"]
    ]  # fmt: skip
    (volume,) = [v for v in pod["volumes"] if v["name"] == "ssh-ca"]
    assert volume["secret"] == {
        "secretName": "sup-ssh-ca", "defaultMode": 0o400, "items": [{"key": "ssh_ca", "path": "ca"}]
    }  # fmt: skip
    containers = {c["name"]: c for c in pod["containers"]}
    mounting = [n for n, c in containers.items() if any(m["name"] == "ssh-ca" for m in c["volumeMounts"])]
    assert mounting == ["sup"]
    (mount,) = [m for m in containers["sup"]["volumeMounts"] if m["name"] == "ssh-ca"]
    assert mount["readOnly"] is True
    env = {e["name"]: e.get("value") for e in containers["sup"]["env"]}
    assert env["SUP_SSH_CA__KEY_FILE"] == mount["mountPath"] + "/ca"
    others = [o for o in objects if o.get("spec", {}).get("template", {}).get("spec") is not pod]
    assert "sup-ssh-ca" not in yaml.safe_dump(others)  # the gateway, the helm test pod, ...
    plain = render(helm_binary, "sup-system")
    assert "ssh-ca" not in yaml.safe_dump(plain) and "SSH_CA" not in yaml.safe_dump(plain)


def test_the_chart_renders_a_restricted_deployment_with_probes_and_secret_references(
    helm_binary: str,
) -> None:
    objects = render(helm_binary, "sup-system", "secrets.ldapBindPassword.name=ldap-bind")
    kinds = _by_kind(objects)
    assert set(kinds) == {
        "Namespace",
        "ServiceAccount",
        "ConfigMap",
        "Role",
        "RoleBinding",
        "Service",
        "Deployment",
        "Job",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "PodDisruptionBudget",  # two replicas by default
        "Pod",  # the `helm test` hook
    }

    deployment = kinds["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == f"localhost/sup:{VERSION}"  # what scripts/build-images builds
    assert container["args"] == ["serve", "--host", "0.0.0.0", "--port", "8080"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["serviceAccountName"] == kinds["ServiceAccount"]["metadata"]["name"]
    env = {e["name"]: e for e in container["env"]}
    assert env["SUP_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "sup-database", "key": "url"}
    assert env["SUP_LDAP__BIND_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "ldap-bind",
        "key": "bind_password",
    }
    assert all("value" not in e for name, e in env.items() if name != "SUP_CONFIG")  # no secret inline

    job = kinds["Job"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    (migrate,) = job["spec"]["template"]["spec"]["containers"]
    assert migrate["args"] == ["db", "upgrade"] and [e["name"] for e in migrate["env"]] == [
        "SUP_DATABASE_URL"
    ]

    role = kinds["Role"]
    assert role["metadata"]["namespace"] == "sup-users"  # the target's namespace, not the release's
    binding = kinds["RoleBinding"]
    assert binding["metadata"]["namespace"] == "sup-users"
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": kinds["ServiceAccount"]["metadata"]["name"],
            "namespace": "sup-system",
        }
    ]


def test_the_rendered_settings_load_in_sup(
    helm_binary: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    objects = render(
        helm_binary,
        "sup-system",
        "kube.namespace=research",
        "kube.settings.pvc_retention=30d",
        "kube.settings.group_pods={physics}",
        "config.slurm.cluster=gpu",
    )
    config = _by_kind(objects)["ConfigMap"]["data"]["sup.yaml"]
    path = tmp_path / "sup.yaml"
    path.write_text(config)
    monkeypatch.setenv("SUP_CONFIG", str(path))
    settings = Settings()
    assert settings.kube is not None and settings.kube.namespace == "research"
    assert settings.kube.pvc_retention == "30d" and settings.kube.group_pods == ["physics"]
    assert settings.slurm is not None and settings.slurm.cluster == "gpu"
    assert yaml.safe_load(config)["reconcile"] == {"interval_seconds": 300}


WRITES = {"create", "update", "patch", "delete", "deletecollection", "*"}
GUARDED = {"statefulsets", "deployments", "daemonsets", "replicasets", "jobs", "cronjobs", "pods",
           "persistentvolumeclaims", "secrets", "*"}  # fmt: skip


def _writes(role: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (verb, resource)
        for rule in role["rules"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        if verb in WRITES
    }


def test_by_default_sup_provisions_outside_the_release_namespace(helm_binary: str) -> None:
    """SUP may create StatefulSets where it provisions; in the release's namespace such a pod could
    mount SUP's own Secrets (database URL, LDAP, Keycloak). So by default the chart creates a
    namespace of its own for the login pods and homes, with Pod Security enforced, and SUP's Role
    and RoleBinding live there only."""
    objects = render(helm_binary, "sup-system")
    namespaces = [o for o in objects if o["kind"] == "Namespace"]
    assert [n["metadata"]["name"] for n in namespaces] == ["sup-users"]
    (created,) = namespaces
    assert created["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert created["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"  # homes survive uninstall
    config = yaml.safe_load(_by_kind(objects)["ConfigMap"]["data"]["sup.yaml"])
    assert config["kube"]["namespace"] == "sup-users"

    rbac = [o for o in objects if o["kind"] in ("Role", "RoleBinding")]
    assert rbac and {o["metadata"]["namespace"] for o in rbac} == {"sup-users"}
    (role,) = [o for o in rbac if o["kind"] == "Role"]
    assert {("create", "statefulsets"), ("create", "persistentvolumeclaims")} <= _writes(role)
    in_release = [o for o in rbac if o["kind"] == "Role" and o["metadata"]["namespace"] == "sup-system"]
    # no Role there at all today; should one come (a Lease, say), it may not write workloads or Secrets
    assert {(r["metadata"]["name"], verb, resource)
            for r in in_release for verb, resource in _writes(r) if resource in GUARDED} == set()  # fmt: skip
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]

    # the same with another release name, and with the namespace given
    objects = render(helm_binary, "hpc", "kube.namespace=logins", release="accounts")
    assert {o["metadata"]["namespace"] for o in objects if o["kind"] in ("Role", "RoleBinding")} == {"logins"}
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"] == ["logins"]
    assert _by_kind(render(helm_binary, "hpc", release="accounts"))["Namespace"]["metadata"]["name"] == (
        "accounts-sup-users"
    )


def test_the_release_namespace_as_the_target_is_refused(helm_binary: str) -> None:
    for release, namespace, setting in [
        ("sup", "sup-system", "kube.namespace=sup-system"),
        ("sup", "sup-users", "replicaCount=2"),  # the default name happens to be the release's
    ]:
        result = helm(
            helm_binary, "template", release, str(CHART), "--namespace", namespace, "--set", setting
        )
        assert result.returncode != 0, f"{namespace}: rendered"
        assert f'kube.namespace "{namespace}" is the release\'s own namespace' in result.stderr
        assert "kube.allowReleaseNamespace=true" in result.stderr
    # explicitly accepted (e.g. a throw-away cluster): the old layout
    objects = render(
        helm_binary, "sup-system", "kube.namespace=sup-system", "kube.allowReleaseNamespace=true"
    )
    assert _by_kind(objects)["Role"]["metadata"]["namespace"] == "sup-system"
    assert "Namespace" not in _by_kind(objects)  # the release's namespace is Helm's, not the chart's


def test_the_created_namespace_follows_the_settings(helm_binary: str) -> None:
    def namespace(*settings: str) -> dict[str, Any] | None:
        return _by_kind(render(helm_binary, "sup-system", *settings)).get("Namespace")

    labels = namespace("kube.settings.group_pods={physics}")
    assert labels is not None
    assert labels["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"  # group pods
    assert labels["metadata"]["labels"]["pod-security.kubernetes.io/warn"] == "restricted"
    extra = namespace("kube.namespaceLabels.team=hpc")
    assert extra is not None and extra["metadata"]["labels"]["team"] == "hpc"
    assert namespace("kube.createNamespace=false") is None  # it must exist then
    result = helm(helm_binary, "template", "sup", str(CHART), "--set", "kube.podSecurity=privileged")
    assert result.returncode != 0 and 'kube.podSecurity "privileged"' in result.stderr


def test_bad_values_fail_with_a_message(helm_binary: str) -> None:
    result = helm(helm_binary, "template", "sup", str(CHART), "--set", "secrets.databaseUrl.name=")
    assert result.returncode != 0
    assert "secrets.databaseUrl.name is required" in result.stderr


def test_options_switch_parts_off(helm_binary: str) -> None:
    objects = render(
        helm_binary, "sup-system", "migration.enabled=false", "kube.enabled=false", "replicaCount=1"
    )
    kinds = _by_kind(objects)
    assert "Job" not in kinds and "Role" not in kinds and "RoleBinding" not in kinds
    assert "Namespace" not in kinds
    assert kinds["Deployment"]["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    assert "kube" not in yaml.safe_load(kinds["ConfigMap"]["data"]["sup.yaml"])


# --- the SSH gateway (docs/ssh-gateway.md "Chart objects") -------------------------------------------


GATEWAY = "gateway.enabled=true"


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels, matchExpressions with In) selects these labels."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", expression
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def _gateway(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The gateway's objects by kind (their name ends in -gateway)."""
    return {o["kind"]: o for o in objects if o["metadata"]["name"].endswith("-gateway")}


def _settings(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """SUP_CONFIG as the ConfigMap `name` holds it."""
    (config,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == name]
    loaded: dict[str, Any] = yaml.safe_load(config["data"]["sup.yaml"])
    return loaded


def test_the_gateway_is_off_by_default(helm_binary: str) -> None:
    objects = render(helm_binary, "sup-system")
    assert _gateway(objects) == {}
    assert [o["kind"] for o in objects].count("Deployment") == 1
    assert "gateway" not in yaml.safe_load(_by_kind(objects)["ConfigMap"]["data"]["sup.yaml"])


def test_the_gateway_runs_restricted_with_its_secrets_mounted_read_only(helm_binary: str) -> None:
    objects = render(helm_binary, "sup-system", GATEWAY)
    gateway = _gateway(objects)
    assert set(gateway) == {"ConfigMap", "Deployment", "Service", "NetworkPolicy", "PodDisruptionBudget"}
    deployment = gateway["Deployment"]
    assert deployment["metadata"]["name"] == "sup-gateway"
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == f"localhost/sup:{VERSION}"  # SUP's image
    assert container["args"] == ["gateway"]
    assert pod["automountServiceAccountToken"] is False  # it talks to SUP, never to the API server
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"ssh": 2222, "metrics-0": 9102, "metrics-1": 9103}  # one metrics port per worker
    assert container["readinessProbe"]["tcpSocket"] == {"port": "ssh"}
    env = {e["name"]: e for e in container["env"]}
    assert list(env) == ["SUP_CONFIG", "SUP_GATEWAY__METRICS_HOST"]  # no secret in the environment
    # /metrics on the pod's own address (the setting's default is loopback), for Prometheus
    assert env["SUP_GATEWAY__METRICS_HOST"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}

    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["config"]["configMap"]["name"] == "sup-gateway"  # its own: no other section
    section = _settings(objects, "sup-gateway")["gateway"]
    assert _settings(objects, "sup")["gateway"] == section  # SUP serves /api/v1/gateway, sleeps pods
    for volume, secret, key, path in [
        ("host-key", "sup-gateway-host-key", "ssh_host_ed25519_key", section["host_key_file"]),
        ("token", "sup-gateway-token", "token", section["token_file"]),
    ]:
        assert mounts[volume]["readOnly"] is True
        source = volumes[volume]["secret"]
        assert source["secretName"] == secret
        assert f"{mounts[volume]['mountPath']}/{source['items'][0]['path']}" == path
        assert source["items"] == [{"key": key, "path": path.rsplit("/", 1)[1]}]
        assert source["defaultMode"] & 0o007 == 0  # not world-readable
    assert mounts["config"]["readOnly"] is True
    assert container["env"][0]["value"] == f"{mounts['config']['mountPath']}/sup.yaml"

    # SUP's own Deployment and Service must not take the gateway's pods for SUP's
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    sup = [o for o in objects if o["metadata"]["name"] == "sup" and o["kind"] in ("Deployment", "Service")]
    assert len(sup) == 2
    for item in sup:
        selector = item["spec"]["selector"]
        assert not _selects(selector if "matchLabels" in selector else {"matchLabels": selector}, labels)
    assert _selects(deployment["spec"]["selector"], labels)

    # a site's own files and names
    objects = render(
        helm_binary,
        "sup-system",
        GATEWAY,
        "gateway.replicaCount=3",
        "gateway.hostKeySecret.name=edge-key",
        "gateway.tokenSecret.name=edge-token",
        "gateway.tokenSecret.key=gw",
        "gateway.settings.token_file=/run/gateway/api-token",
        "gateway.settings.listen_port=2022",
        "gateway.settings.workers=1",
    )
    deployment = _gateway(objects)["Deployment"]
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"ssh": 2022, "metrics-0": 9102}
    volumes = {v["name"]: v["secret"] for v in pod["volumes"] if "secret" in v}
    assert volumes["token"]["secretName"] == "edge-token"
    assert volumes["token"]["items"] == [{"key": "gw", "path": "api-token"}]
    assert volumes["host-key"]["secretName"] == "edge-key"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["token"] == "/run/gateway"
    section = _settings(objects, "sup-gateway")["gateway"]
    assert section["host_key_secret"] == "edge-key"
    assert section["token_file"] == "/run/gateway/api-token"
    assert _gateway(objects)["Service"]["spec"]["ports"][0]["port"] == 22  # still 22 outside


def test_the_gateway_service_maps_22_to_the_listen_port_keeping_the_client_address(
    helm_binary: str,
) -> None:
    service = _gateway(render(helm_binary, "sup-system", GATEWAY))["Service"]
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["externalTrafficPolicy"] == "Local"  # the audit log gets the client's address
    assert service["spec"]["ports"] == [{"name": "ssh", "port": 22, "targetPort": "ssh", "protocol": "TCP"}]
    balanced = _gateway(
        render(
            helm_binary,
            "sup-system",
            GATEWAY,
            "gateway.service.type=LoadBalancer",
            "gateway.service.loadBalancerIP=203.0.113.22",
        )
    )["Service"]
    assert balanced["spec"]["type"] == "LoadBalancer"
    assert balanced["spec"]["loadBalancerIP"] == "203.0.113.22"
    assert balanced["spec"]["externalTrafficPolicy"] == "Local"
    pinned = _gateway(render(helm_binary, "sup-system", GATEWAY, "gateway.service.nodePort=30022"))
    assert pinned["Service"]["spec"]["ports"][0]["nodePort"] == 30022
    result = helm(
        helm_binary,
        "template",
        "sup",
        str(CHART),
        "--set",
        GATEWAY,
        "--set",
        "gateway.service.type=ClusterIP",
    )
    assert result.returncode != 0 and 'gateway.service.type "ClusterIP"' in result.stderr


def test_the_rendered_gateway_settings_load_in_sup(
    helm_binary: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """SUP's settings carry the section (SUP serves /api/v1/gateway and puts pods to sleep); the
    gateway's own hold it without SUP's other sections, whose secrets it does not get."""
    objects = render(
        helm_binary,
        "hpc",
        GATEWAY,
        "gateway.settings.public_host=login.cluster.example",
        "gateway.settings.idle_seconds=3600",
        "service.port=8081",
        "config.ldap.url=ldaps://ldap.example.org",
        "config.ldap.bind_dn=cn=sup",
        "config.ldap.base_dn=dc=example",
        "config.log.format=text",
        release="accounts",
    )

    def load(configmap: str) -> Settings:
        path = tmp_path / f"{configmap}.yaml"
        path.write_text(yaml.safe_dump(_settings(objects, configmap)))
        monkeypatch.setenv("SUP_CONFIG", str(path))
        return Settings()

    monkeypatch.setenv("SUP_LDAP__BIND_PASSWORD", "from-its-secret")  # SUP's pod has it
    sup = load("accounts-sup")
    assert sup.ldap is not None
    assert sup.gateway is not None and sup.gateway.idle_seconds == 3600
    monkeypatch.delenv("SUP_LDAP__BIND_PASSWORD")  # the gateway's pod does not
    settings = load("accounts-sup-gateway")
    assert settings.ldap is None and settings.log.format == "text"
    gateway = settings.gateway
    assert gateway == sup.gateway
    assert gateway.sup_url == "http://accounts-sup.hpc.svc:8081"  # SUP's in-cluster Service
    assert gateway.public_host == "login.cluster.example" and gateway.idle_seconds == 3600
    assert gateway.host_key_secret == "sup-gateway-host-key"
    assert gateway.host_key_file == "/etc/sup/gateway/ssh_host_ed25519_key"
    assert gateway.token_file == "/etc/sup/gateway-token/token"
    service = next(o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "accounts-sup")
    assert service["spec"]["ports"][0]["port"] == 8081


def test_the_gateway_may_reach_every_login_pod_and_nothing_else_may_by_that_rule(
    helm_binary: str,
) -> None:
    """SUP's per-user NetworkPolicy admits kube.settings.ssh_sources (CIDRs) only; policies add up,
    so the chart's own policy in the login namespace admits the gateway's pods to sshd."""
    objects = render(helm_binary, "sup-system", GATEWAY, "kube.settings.ssh_port=2200")
    policy = _gateway(objects)["NetworkPolicy"]
    assert policy["metadata"]["namespace"] == "sup-users"
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress"]  # egress stays as SUP's policy has it
    for owner in (Owner("user", "alice"), Owner("group", "physics")):
        assert _selects(spec["podSelector"], owner.pod_labels())
    assert not _selects(
        spec["podSelector"], {"app.kubernetes.io/managed-by": "sup", "app.kubernetes.io/component": "home"}
    )
    (rule,) = spec["ingress"]
    assert [(p["protocol"], p["port"]) for p in rule["ports"]] == [("TCP", 2200), ("TCP", 9101)]
    (source,) = rule["from"]
    assert source["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "sup-system"}}
    gateway_pod = _gateway(objects)["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert _selects(source["podSelector"], gateway_pod)
    sup_pod = _by_kind(render(helm_binary, "sup-system"))["Deployment"]["spec"]["template"]["metadata"]
    assert not _selects(source["podSelector"], sup_pod["labels"])  # SUP's own pods are not admitted
    # no login namespace, no policy
    assert "NetworkPolicy" not in _gateway(render(helm_binary, "sup-system", GATEWAY, "kube.enabled=false"))


def _pods_policy(objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The NetworkPolicy of the gateway's own pods (in the release's namespace)."""
    return next(
        (o for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "sup-gateway-pods"),
        None,
    )


def _ports(rule: dict[str, Any]) -> list[tuple[str, int]]:
    return [(p["protocol"], p["port"]) for p in rule["ports"]]


def test_the_gateways_own_pods_take_ssh_and_reach_sup_login_pods_and_dns_only(helm_binary: str) -> None:
    """The gateway faces the outside and holds a token that reads key fingerprints: in, ssh (from
    anywhere unless the site names sources) and /metrics from the sources the site names (none by
    default); out, SUP's API, the login pods' sshd and idle reporter, DNS, nothing else."""
    objects = render(helm_binary, "sup-system", GATEWAY, "kube.settings.ssh_port=2200")
    policy = _pods_policy(objects)
    assert policy is not None and "namespace" not in policy["metadata"]  # the release's
    spec = policy["spec"]
    gateway_pod = _gateway(objects)["Deployment"]["spec"]["template"]["metadata"]["labels"]
    (sup,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "sup"]
    sup_pod = sup["spec"]["template"]["metadata"]["labels"]
    assert _selects(spec["podSelector"], gateway_pod) and not _selects(spec["podSelector"], sup_pod)
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    (ssh,) = spec["ingress"]  # no rule for the metrics ports: nobody may scrape until the site says who
    assert _ports(ssh) == [("TCP", 2222)] and "from" not in ssh  # people connect from anywhere
    to_sup, to_pods, dns = spec["egress"]
    (peer,) = to_sup["to"]
    assert set(peer) == {"podSelector"}  # SUP's pods, in the gateway's own namespace
    assert _selects(peer["podSelector"], sup_pod) and not _selects(peer["podSelector"], gateway_pod)
    assert _ports(to_sup) == [("TCP", 8080)]
    (peer,) = to_pods["to"]
    assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "sup-users"}}
    for owner in (Owner("user", "alice"), Owner("group", "physics")):
        assert _selects(peer["podSelector"], owner.pod_labels())
    assert _ports(to_pods) == [("TCP", 2200), ("TCP", 9101)]
    assert "to" not in dns and _ports(dns) == [("UDP", 53), ("TCP", 53)]

    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    office = {"ipBlock": {"cidr": "198.51.100.0/24"}}
    objects = render(
        helm_binary,
        "sup-system",
        GATEWAY,
        "gateway.networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring",
        "gateway.networkPolicy.sshFrom[0].ipBlock.cidr=198.51.100.0/24",
        "gateway.networkPolicy.extraEgress[0].ports[0].port=8443",
        "kube.enabled=false",
    )
    policy = _pods_policy(objects)
    assert policy is not None
    ssh, metrics = policy["spec"]["ingress"]
    tester = {
        "podSelector": {
            "matchLabels": {"app.kubernetes.io/name": "sup-test", "app.kubernetes.io/instance": "sup"}
        }
    }
    assert ssh["from"] == [office, tester]  # and the `helm test` pod, which checks the port answers
    assert metrics["from"] == [monitoring] and _ports(metrics) == [("TCP", 9102), ("TCP", 9103)]  # per worker
    assert [rule["ports"] for rule in policy["spec"]["egress"]][1:] == [
        [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],  # no login pods without kube
        [{"port": 8443}],
    ]
    assert (
        _pods_policy(render(helm_binary, "sup-system", GATEWAY, "gateway.networkPolicy.enabled=false"))
        is None
    )


def test_the_gateway_metrics_address_and_tls_to_sup_follow_the_values(
    helm_binary: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def gateway(*settings: str) -> tuple[dict[str, Any], dict[str, Any]]:
        objects = render(helm_binary, "sup-system", GATEWAY, *settings)
        return _gateway(objects)["Deployment"]["spec"]["template"]["spec"], _settings(objects, "sup-gateway")

    for settings in (["gateway.settings.metrics_port=null"], ["gateway.settings.metrics_host=127.0.0.1"]):
        pod, _ = gateway(*settings)  # no endpoint, or the site's own address: the chart sets none
        assert [e["name"] for e in pod["containers"][0]["env"]] == ["SUP_CONFIG"], settings

    pod, config = gateway(
        "gateway.supCaSecret.name=sup-ca", "gateway.settings.sup_url=https://sup-tls.sup-system.svc:8443"
    )
    section = config["gateway"]
    assert section["sup_ca_file"] == "/etc/sup/gateway-ca/ca.crt"
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["sup-ca"] == {"name": "sup-ca", "mountPath": "/etc/sup/gateway-ca", "readOnly": True}
    assert volumes["sup-ca"]["secret"] == {
        "secretName": "sup-ca",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }
    path = tmp_path / "sup.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("SUP_CONFIG", str(path))
    loaded = Settings().gateway
    assert loaded is not None and loaded.sup_ca_file == "/etc/sup/gateway-ca/ca.crt"
    assert loaded.sup_url == "https://sup-tls.sup-system.svc:8443"
    # a CA for the plain-HTTP default URL would be ignored: refused
    result = helm(
        helm_binary,
        "template",
        "sup",
        str(CHART),
        "--set",
        GATEWAY,
        "--set",
        "gateway.supCaSecret.name=sup-ca",
    )
    assert (
        result.returncode != 0 and "gateway.supCaSecret is set but gateway.settings.sup_url" in result.stderr
    )


def test_bad_gateway_values_fail_with_a_message(helm_binary: str) -> None:
    for setting, message in [
        ("gateway.tokenSecret.name=", "gateway.tokenSecret.name is required"),
        ("gateway.hostKeySecret.name=", "gateway.hostKeySecret.name is required"),
        ("gateway.settings.token_file=/etc/sup/gateway/token", "in different directories"),
        ("gateway.settings.host_key_file=/etc/sup/config/key", "may not be in /etc/sup/config"),
    ]:
        result = helm(helm_binary, "template", "sup", str(CHART), "--set", GATEWAY, "--set", setting)
        assert result.returncode != 0, setting
        assert message in result.stderr, result.stderr


def test_the_dockerfile_builds_the_image_the_chart_runs() -> None:
    """The image build itself needs a container engine (not on CI); this checks they agree."""
    dockerfile = (REPO / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", dockerfile, re.MULTILINE | re.IGNORECASE)
    assert len(stages) >= 2  # multi-stage
    arguments = dict(re.findall(r"^ARG\s+(\w+)=(\S+)", dockerfile, re.MULTILINE))
    for image, _ in stages:
        image = re.sub(r"\$\{(\w+)\}", lambda m: arguments[m.group(1)], image)
        # a digest, or a full version tag (python:3.11.11-slim-bookworm), never `latest` or `3`
        assert "@sha256:" in image or re.search(r":\d+\.\d+\.\d+-", image), (
            f"base image {image} is not pinned"
        )
    assert re.search(r"^USER\s+10001(:10001)?\s*$", dockerfile, re.MULTILINE)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == 10001
    assert re.search(r'^ENTRYPOINT\s+\["sup"\]', dockerfile, re.MULTILINE)
    assert "constraints.txt" in dockerfile
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == VERSION
    assert f'org.opencontainers.image.version="{VERSION}"' in dockerfile


# --- on a real API server ---------------------------------------------------------------------------


@pytest.fixture
def release_namespace(kubeapi: KubeApiServer) -> str:
    return kubeapi.new_namespace("sup-system", pod_security="restricted")


def test_the_rendered_chart_is_accepted_and_its_pods_meet_restricted(
    helm_binary: str, kubeapi: KubeApiServer, release_namespace: str
) -> None:
    release = f"sup-{uuid.uuid4().hex[:8]}"  # the chart creates the target namespace <release>-users
    objects = render(helm_binary, release_namespace, GATEWAY, release=release)  # the gateway's too
    target = f"{release}-users"
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    with kubeapi.admin() as admin:
        apply_objects(admin, [o for o in objects if o["kind"] != "NetworkPolicy"], release_namespace)
        for policy in policies:  # in the login namespace, and the gateway pods' own
            name = policy["metadata"]["name"]
            namespace = policy["metadata"].get("namespace", release_namespace)
            url = f"{collection(namespace, 'networkpolicies')}/{name}"
            admin.apply(url, policy, manager="helm-test")
            assert admin.get(url) is not None
        assert admin.warnings == []  # Pod Security `warn` is restricted: nothing to say
        workloads = [o for o in objects if o["kind"] in ("Deployment", "Job")]
        assert sorted(o["metadata"]["name"] for o in workloads if o["kind"] == "Deployment") == [
            release,
            f"{release}-gateway",
        ]
        for workload in workloads:
            template = workload["spec"]["template"]
            name = f"{workload['metadata']['name']}-pod"
            pod = {
                "metadata": {"name": name, "labels": template["metadata"]["labels"]},
                "spec": {
                    **template["spec"],
                    "restartPolicy": "Never" if workload["kind"] == "Job" else "Always",
                },
            }
            created = admin.create(collection(release_namespace, "pods"), pod)
            assert created["metadata"]["name"] == name  # admitted
        kinds = _by_kind(objects)
        role = admin.get(f"{collection(target, 'roles')}/{kinds['Role']['metadata']['name']}")
        assert role is not None
        namespace = admin.get(f"/api/v1/namespaces/{target}")
        assert namespace is not None
        assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_an_upgrade_that_would_move_the_target_namespace_is_refused(
    helm_binary: str, kubeapi: KubeApiServer, release_namespace: str
) -> None:
    """A release of chart 0.1.0 with `kube.namespace` unset provisions into the release's namespace;
    upgraded, the new default would leave its login pods running unmanaged and start empty homes
    elsewhere. The chart reads the live ConfigMap (`lookup`, so `--dry-run=server`) and refuses."""
    release = f"sup-{uuid.uuid4().hex[:8]}"
    before = {
        "metadata": {"name": release},
        "data": {"sup.yaml": f"kube:\n  namespace: {release_namespace}\n"},
    }
    with kubeapi.admin() as admin:
        admin.create(collection(release_namespace, "configmaps"), before)

    def upgrade(*settings: str) -> subprocess.CompletedProcess[str]:
        args = ["template", release, str(CHART), "--namespace", release_namespace, "--dry-run=server"]
        args += ["--kubeconfig", str(kubeapi.admin_kubeconfig)]
        for setting in settings:
            args += ["--set", setting]
        return helm(helm_binary, *args)

    refused = upgrade()
    assert refused.returncode != 0
    assert f'SUP provisions into namespace "{release_namespace}" today' in refused.stderr
    assert f'would move it to "{release}-users"' in refused.stderr
    stay = upgrade(f"kube.namespace={release_namespace}", "kube.allowReleaseNamespace=true")
    assert stay.returncode == 0, stay.stderr
    moved = upgrade("kube.allowNamespaceMove=true")  # the homes were moved first
    assert moved.returncode == 0, moved.stderr
    with kubeapi.admin() as admin:  # a release that already provisions elsewhere upgrades as before
        admin.merge_patch(
            f"{collection(release_namespace, 'configmaps')}/{release}",
            {"data": {"sup.yaml": f"kube:\n  namespace: {release}-users\n"}},
        )
    assert upgrade().returncode == 0


def test_a_namespace_the_chart_does_not_create_must_enforce_pod_security(
    helm_binary: str, kubeapi: KubeApiServer, release_namespace: str
) -> None:
    """SUP may create StatefulSets where it provisions; only the namespace's Pod Security label keeps
    such a pod from running privileged. The chart labels the namespace it creates; one it does not
    create (kube.createNamespace=false, or the release's own) is looked up at install and upgrade,
    and a missing or weaker label refuses the install with the command that fixes it."""

    def install(namespace: str, *settings: str) -> subprocess.CompletedProcess[str]:
        args = ["template", f"sup-{uuid.uuid4().hex[:8]}", str(CHART), "--namespace", release_namespace]
        args += ["--dry-run=server", "--kubeconfig", str(kubeapi.admin_kubeconfig)]
        for setting in (f"kube.namespace={namespace}", "kube.createNamespace=false", *settings):
            args += ["--set", setting]
        return helm(helm_binary, *args)

    absent = f"users-{uuid.uuid4().hex[:8]}"
    result = install(absent)
    assert result.returncode != 0
    assert f'kube.namespace "{absent}" does not exist and kube.createNamespace is false' in result.stderr
    for level, settings in [
        (None, ()),
        ("privileged", ()),
        ("baseline", ()),  # baseline is for group pods only
        ("privileged", ("kube.settings.group_pods={physics}",)),
    ]:
        namespace = kubeapi.new_namespace("users", pod_security=level)
        result = install(namespace, *settings)
        assert result.returncode != 0, (level, settings)
        assert f'namespace "{namespace}" enforces Pod Security "{level or "nothing"}"' in result.stderr
        needed = "baseline" if settings else "restricted"
        assert f"pod-security.kubernetes.io/enforce={needed}" in result.stderr  # the fix, spelled out
    for level, settings in [
        ("restricted", ()),
        ("baseline", ("kube.settings.group_pods={physics}",)),
        ("restricted", ("kube.settings.group_pods={physics}",)),  # stricter is fine
    ]:
        namespace = kubeapi.new_namespace("users", pod_security=level)
        result = install(namespace, *settings)
        assert result.returncode == 0, result.stderr
        assert "kind: Namespace" not in result.stdout  # looked up, not created
    # the release's own namespace (explicitly allowed) is not the chart's either: checked the same way
    unlabelled = kubeapi.new_namespace("sup-system", pod_security=None)
    args = ["template", "sup", str(CHART), "--namespace", unlabelled, "--dry-run=server"]
    args += ["--kubeconfig", str(kubeapi.admin_kubeconfig), "--set", f"kube.namespace={unlabelled}"]
    result = helm(helm_binary, *args, "--set", "kube.allowReleaseNamespace=true")
    assert result.returncode != 0 and "enforces Pod Security" in result.stderr
    # without a cluster (plain `helm template`) nothing can be looked up: it renders, unchecked
    assert "Namespace" not in _by_kind(
        render(helm_binary, "sup-system", f"kube.namespace={absent}", "kube.createNamespace=false")
    )


# --- the home directory maker (docs/homes.md) --------------------------------------------------------

SHARED = ("kube.settings.home_mode=shared", "kube.settings.shared_home_claim=site-homes")


def _homes(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objects if o["metadata"]["name"].endswith("-homes")}


def test_the_home_maker_runs_only_in_shared_mode_with_the_least_it_needs(helm_binary: str) -> None:
    assert _homes(render(helm_binary, "sup-system")) == {}
    objects = render(helm_binary, "sup-system", *SHARED, "homes.settings.resync_seconds=600")
    homes = _homes(objects)
    assert set(homes) == {"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Deployment"}
    assert {o["metadata"]["namespace"] for o in homes.values()} == {"sup-users"}
    assert homes["Role"]["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}
    ]
    assert homes["RoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "sup-homes", "namespace": "sup-users"}
    ]
    deployment = homes["Deployment"]["spec"]
    assert deployment["replicas"] == 1 and deployment["strategy"] == {"type": "Recreate"}
    pod = deployment["template"]["spec"]
    assert pod["serviceAccountName"] == "sup-homes"
    assert pod["securityContext"]["runAsUser"] == 0
    (container,) = pod["containers"]
    assert container["args"] == ["homes", "serve"]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9103, "protocol": "TCP"}]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]},
    }
    assert {"name": "homes", "persistentVolumeClaim": {"claimName": "site-homes"}} in pod["volumes"]
    assert {"name": "homes", "mountPath": "/srv/homes"} in container["volumeMounts"]
    section = _settings(objects, "sup-homes")["home_dirs"]
    assert section == {
        "namespace": "sup-users", "mount": "/srv/homes", "home_root": "/home", "quota": "none",
        "size": "10Gi", "resync_seconds": 600,
    }  # fmt: skip
    namespace = _by_kind(objects)["Namespace"]["metadata"]["labels"]
    assert namespace["pod-security.kubernetes.io/enforce"] == "baseline"


def test_the_home_makers_rendered_settings_load_in_sup(helm_binary: str, monkeypatch, tmp_path: Path) -> None:
    objects = render(helm_binary, "sup-system", *SHARED, "kube.settings.home_root=/shared/home")
    (tmp_path / "sup.yaml").write_text(_homes(objects)["ConfigMap"]["data"]["sup.yaml"])
    monkeypatch.setenv("SUP_CONFIG", str(tmp_path / "sup.yaml"))
    from sup.config import load_settings

    section = load_settings().home_dirs
    assert section is not None and section.home_root == "/shared/home" and section.namespace == "sup-users"


def test_xfs_quotas_add_sys_admin_and_make_the_namespace_privileged(helm_binary: str) -> None:
    objects = render(
        helm_binary,
        "sup-system",
        *SHARED,
        "homes.quota=xfs",
        "homes.size=50Gi",
        "homes.settings.metrics_port=9200",
    )
    homes = _homes(objects)
    (container,) = homes["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["securityContext"]["capabilities"]["add"] == ["CHOWN", "FOWNER", "SYS_ADMIN"]
    assert _settings(objects, "sup-homes")["home_dirs"]["quota"] == "xfs"
    assert _settings(objects, "sup-homes")["home_dirs"]["size"] == "50Gi"
    assert container["ports"] == [{"name": "metrics", "containerPort": 9200, "protocol": "TCP"}]
    assert _settings(objects, "sup-homes")["home_dirs"]["metrics_port"] == 9200
    namespace = _by_kind(objects)["Namespace"]["metadata"]["labels"]
    assert namespace["pod-security.kubernetes.io/enforce"] == "privileged"


def test_shared_homes_without_a_claim_or_with_a_bad_quota_fail_with_a_message(helm_binary: str) -> None:
    result = helm(helm_binary, "template", "sup", str(CHART), "--set", "kube.settings.home_mode=shared")
    assert result.returncode != 0 and "kube.settings.shared_home_claim is required" in result.stderr
    result = helm(helm_binary, "template", "sup", str(CHART), *(x for s in SHARED for x in ("--set", s)),
                  "--set", "homes.quota=zfs")  # fmt: skip
    assert result.returncode != 0 and 'homes.quota "zfs"' in result.stderr


@pytest.mark.parametrize(
    ("quota", "level", "stricter"), [("none", "baseline", "restricted"), ("xfs", "privileged", "baseline")]
)
def test_the_home_makers_pod_is_admitted_where_the_chart_puts_it_and_needs_that_level(
    helm_binary: str, kubeapi: KubeApiServer, release_namespace: str, quota: str, level: str, stricter: str
) -> None:
    release = f"sup-{uuid.uuid4().hex[:8]}"
    objects = render(helm_binary, release_namespace, *SHARED, f"homes.quota={quota}", release=release)
    target = f"{release}-users"
    with kubeapi.admin() as admin:
        apply_objects(admin, [o for o in objects if o["kind"] != "NetworkPolicy"], release_namespace)
        namespace = admin.get(f"/api/v1/namespaces/{target}")
        assert namespace is not None
        assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == level
        template = _homes(objects)["Deployment"]["spec"]["template"]
        pod = {
            "metadata": {"name": "homes-pod", "labels": template["metadata"]["labels"]},
            "spec": template["spec"],
        }
        created = admin.create(collection(target, "pods"), pod)
        assert created["metadata"]["name"] == "homes-pod"  # admitted
        # one level stricter refuses it (without its ServiceAccount, which exists only in the target)
        elsewhere = kubeapi.new_namespace("stricter", pod_security=stricter)
        spec = {k: v for k, v in template["spec"].items() if k != "serviceAccountName"}
        with pytest.raises(ApiError) as refused:
            admin.create(
                collection(elsewhere, "pods"),
                {**pod, "spec": {**spec, "automountServiceAccountToken": False}},
            )
        assert refused.value.status == 403 and "violates PodSecurity" in str(refused.value)
