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
from tests.support.helm import CHART, apply_objects, helm, render
from tests.support.kubeapi import KubeApiServer, collection

REPO = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def _by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objects}


def test_helm_lint_passes(helm_binary: str) -> None:
    result = helm(helm_binary, "lint", "--strict", str(CHART))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


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
    objects = render(helm_binary, release_namespace, release=release)
    target = f"{release}-users"
    with kubeapi.admin() as admin:
        apply_objects(admin, objects, release_namespace)
        assert admin.warnings == []  # Pod Security `warn` is restricted: nothing to say
        kinds = _by_kind(objects)
        for kind in ("Deployment", "Job"):
            template = kinds[kind]["spec"]["template"]
            pod = {
                "metadata": {"name": f"{kind.lower()}-pod", "labels": template["metadata"]["labels"]},
                "spec": {**template["spec"], "restartPolicy": "Never" if kind == "Job" else "Always"},
            }
            created = admin.create(collection(release_namespace, "pods"), pod)
            assert created["metadata"]["name"] == f"{kind.lower()}-pod"  # admitted
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
