"""Templates: values cannot change the YAML's structure, operators can replace a template, and a broken
template stops the target with a message naming it, before anything is read or written (pure)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sup.config import Settings
from sup.targets.base import TargetError
from sup.targets.kube import KubeTarget
from sup.targets.kube.model import Observed
from sup.targets.kube.render import Renderer, TemplateError, shipped_templates
from tests.kube.plans import settings, state, user


def test_values_are_data_never_yaml() -> None:
    sly = replace(user("kim"), home_directory='/home/kim"\n    hostPath: {path: /}\nx: "')
    workload = next(w for w in Renderer(settings()).user_login(sly) if w.kind == "workload")
    spec = workload.manifest["spec"]["template"]["spec"]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "home", "mountPath": sly.home_directory}]
    assert [v["name"] for v in spec["volumes"]] == ["home"] and "x" not in workload.manifest


def test_an_operator_template_replaces_the_shipped_one(tmp_path: Path) -> None:
    shipped = (shipped_templates() / "service.yaml.j2").read_text()
    (tmp_path / "service.yaml.j2").write_text(
        shipped.replace("metadata:\n", "metadata:\n  labels: {team: hpc}\n  annotations: {note: mine}\n", 1)
    )
    renderer = Renderer(settings(templates_dir=str(tmp_path)))
    service = next(w for w in renderer.user_login(user("kim")) if w.kind == "service").manifest
    assert service["metadata"]["annotations"]["note"] == "mine"
    # SUP's own labels are set whatever the template says
    assert service["metadata"]["labels"] == {
        "team": "hpc", "app.kubernetes.io/managed-by": "sup", "app.kubernetes.io/component": "login",
        "sup/user": "kim",
    }  # fmt: skip
    assert Renderer(settings(templates_dir=str(tmp_path))).home(user("kim")).name == "home-kim"  # shipped


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Service\napiVersion: v1\nspec: {type: {{ settings.no_such_setting }}}\n", "no_such_setting"),
        ("{% if %}", "service.yaml.j2, line 1"),
        ("apiVersion: v1\nkind: ConfigMap\n", "must render one v1 Service"),
        ("apiVersion: v1\nkind: Service\nspec: [\n", "did not render valid YAML"),
    ],
)
def test_a_broken_template_stops_the_target_naming_it(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "service.yaml.j2").write_text(text)
    target = KubeTarget(
        Settings(kube={"namespace": "research", "templates_dir": str(tmp_path)}), client=_no_client()
    )
    with pytest.raises(TargetError) as info:
        target.diff(state(user("kim")), Observed())
    assert message in str(info.value) and "service.yaml.j2" in str(info.value)


def test_a_missing_templates_dir_is_refused_at_open(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="is not a directory"):
        KubeTarget(
            Settings(kube={"namespace": "research", "templates_dir": str(tmp_path / "nope")}),
            client=_no_client(),
        )
    with pytest.raises(TemplateError):
        Renderer(settings(templates_dir=str(tmp_path / "nope")))


def test_no_kubeconfig_outside_a_pod_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(TargetError, match="SUP_KUBE__KUBECONFIG"):
        KubeTarget(Settings(kube={"namespace": "research"}))
    with pytest.raises(TargetError, match="not a readable file"):
        KubeTarget(Settings(kube={"namespace": "research", "kubeconfig": str(tmp_path / "missing")}))
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    with pytest.raises(TargetError, match="cannot load the Kubernetes configuration"):
        KubeTarget(Settings(kube={"namespace": "research", "kubeconfig": str(broken)}))


def _no_client() -> Any:
    """Stands in for the connection in tests that must fail before any request."""

    class NoClient:
        def close(self) -> None:
            pass

    return NoClient()
