"""The Slurm target from SUP's Helm chart (`slurm.enabled`, docs/slurm.md), as `helm template` renders
it: SUP's container reads the site's slurm.conf and reaches munged's socket, a `munge` sidecar alone
mounts the key Secret, every path SUP writes is a volume (the root filesystem stays read-only), values
that cannot work are refused with what to set, and the pod is admitted under Pod Security restricted
by a real API server."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from sup.config import Settings
from tests.support.chart_slurm import MUNGE_KEY_SECRET, SLURM_CONF_MAP
from tests.support.helm import CHART, helm, render
from tests.support.kubeapi import KubeApiServer, collection

ENABLED = (
    "slurm.enabled=true",
    f"slurm.slurmConf.configMap={SLURM_CONF_MAP}",
    f"slurm.mungeKey.secret={MUNGE_KEY_SECRET}",
    "config.slurm.cluster=gpu",
)


def _deployment_pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "sup"]
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


def _containers(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in pod["containers"]}


def _mounts(container: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """volume name -> (mount path, read-only)"""
    return {m["name"]: (m["mountPath"], bool(m.get("readOnly"))) for m in container["volumeMounts"]}


def _settings(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (config,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "sup"]
    loaded: dict[str, Any] = yaml.safe_load(config["data"]["sup.yaml"])
    return loaded


def test_slurm_is_off_by_default(helm_binary: str) -> None:
    objects = render(helm_binary, "sup-system")
    pod = _deployment_pod(objects)
    assert list(_containers(pod)) == ["sup"]
    assert "SLURM_CONF" not in {e["name"] for e in pod["containers"][0]["env"]}
    assert {v["name"] for v in pod["volumes"]} == {"config", "tmp"}
    assert "slurm" not in _settings(objects)


def test_the_munge_sidecar_alone_mounts_the_key_and_sup_reads_slurm_conf(helm_binary: str) -> None:
    objects = render(helm_binary, "sup-system", *ENABLED)
    pod = _deployment_pod(objects)
    containers = _containers(pod)
    assert list(containers) == ["sup", "munge"]
    sup, munge = containers["sup"], containers["munge"]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["kubectl.kubernetes.io/default-container"] == "sup"  # `kubectl exec deploy/sup`

    env = {e["name"]: e.get("value") for e in sup["env"]}
    assert env["SLURM_CONF"] == "/etc/slurm/slurm.conf"
    assert _mounts(sup) == {
        "config": ("/etc/sup", True),
        "tmp": ("/tmp", False),
        "slurm-conf": ("/etc/slurm", True),
        "munge-socket": ("/run/munge", True),
        "slurm-lock": ("/run/lock/sup", False),
    }
    assert _mounts(munge) == {
        "munge-key": ("/etc/munge-key", True),
        "munge-state": ("/var/lib/munge", False),
        "munge-socket": ("/run/munge", False),
    }
    # the key Secret is in no other container of any workload the chart renders
    for workload in (o for o in objects if o["kind"] in ("Deployment", "Job")):
        for container in workload["spec"]["template"]["spec"]["containers"]:
            if container is not munge:
                assert "munge-key" not in _mounts(container), container["name"]

    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["slurm-conf"]["configMap"] == {
        "name": SLURM_CONF_MAP,
        "items": [{"key": "slurm.conf", "path": "slurm.conf"}],
    }
    assert volumes["munge-key"]["secret"] == {
        "secretName": MUNGE_KEY_SECRET,
        "defaultMode": 0o400,
        "items": [{"key": "munge.key", "path": "munge.key"}],
    }
    for name in ("munge-state", "munge-socket", "slurm-lock"):
        assert volumes[name]["emptyDir"]["medium"] == "Memory", name

    # munged: SUP's image, its script, as the munge uid (not root, not SUP's), read-only root
    assert munge["image"] == sup["image"]
    assert munge["command"] == ["/usr/local/sbin/sup-munged"]
    assert munge["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": 994,
        "runAsGroup": 994,
    }
    # the Secret's file is root's, readable through the pod's fsGroup (munged copies it 0400)
    assert pod["securityContext"]["fsGroup"] == 10001
    assert pod["securityContext"]["runAsUser"] == 10001 != munge["securityContext"]["runAsUser"]
    assert munge["resources"]["limits"] == {"memory": "64Mi"}

    # the migration Job needs no Slurm
    (job,) = [o for o in objects if o["kind"] == "Job"]
    (migrate,) = job["spec"]["template"]["spec"]["containers"]
    assert {m["name"] for m in migrate["volumeMounts"]} == {"tmp"}


def test_the_rendered_slurm_settings_load_in_sup_with_the_lock_dir_on_a_volume(
    helm_binary: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for extra, lock_dir in [
        ((), "/run/lock/sup"),
        (("config.slurm.lock_dir=/var/lock/sacctmgr",), "/var/lock/sacctmgr"),
    ]:
        objects = render(helm_binary, "sup-system", *ENABLED, "config.slurm.chunk_size=500", *extra)
        path = tmp_path / "sup.yaml"
        path.write_text(yaml.safe_dump(_settings(objects)))
        monkeypatch.setenv("SUP_CONFIG", str(path))
        settings = Settings()
        assert settings.slurm is not None
        assert (settings.slurm.cluster, settings.slurm.chunk_size) == ("gpu", 500)
        assert settings.slurm.lock_dir == lock_dir
        assert _mounts(_containers(_deployment_pod(objects))["sup"])["slurm-lock"] == (lock_dir, False)


def test_slurm_values_that_cannot_work_are_refused_with_what_to_set(helm_binary: str) -> None:
    def template(*settings: str) -> str:
        args = ["template", "sup", str(CHART)]
        for setting in settings:
            args += ["--set", setting]
        result = helm(helm_binary, *args)
        assert result.returncode != 0, settings
        return result.stderr

    without = [s for s in ENABLED if not s.startswith("config.slurm.cluster")]
    assert "slurm.enabled needs config.slurm.cluster" in template(*without)
    assert "slurm.enabled needs slurm.slurmConf.configMap" in template(*ENABLED, "slurm.slurmConf.configMap=")
    assert "slurm.enabled needs slurm.mungeKey.secret" in template(*ENABLED, "slurm.mungeKey.secret=")
    assert "slurm.mungeUid 0: munged runs as a non-root uid" in template(*ENABLED, "slurm.mungeUid=0")
    assert "slurm.enabled needs podSecurityContext.fsGroup" in template(
        *ENABLED, "podSecurityContext.fsGroup=null"
    )
    assert 'config.slurm.lock_dir "/tmp/lock": not in or above /tmp' in template(
        *ENABLED, "config.slurm.lock_dir=/tmp/lock"
    )
    assert 'config.slurm.lock_dir "/etc": not in or above /etc/sup' in template(
        *ENABLED, "config.slurm.lock_dir=/etc"
    )
    assert 'config.slurm.lock_dir "run/lock": use an absolute, clean path' in template(
        *ENABLED, "config.slurm.lock_dir=run/lock"
    )


def test_helm_lint_passes_with_slurm(helm_binary: str) -> None:
    args = ["lint", "--strict", str(CHART)]
    for setting in ENABLED:
        args += ["--set", setting]
    result = helm(helm_binary, *args)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_pod_with_the_munge_sidecar_is_admitted_under_restricted(
    helm_binary: str, kubeapi: KubeApiServer
) -> None:
    namespace = kubeapi.new_namespace("sup-system", pod_security="restricted")
    pod = _deployment_pod(render(helm_binary, namespace, *ENABLED))
    name = f"sup-slurm-{uuid.uuid4().hex[:6]}"
    with kubeapi.admin() as admin:
        created = admin.create(collection(namespace, "pods"), {"metadata": {"name": name}, "spec": pod})
        assert created["metadata"]["name"] == name
        assert admin.warnings == []
