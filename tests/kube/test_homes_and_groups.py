"""Home claims that grow (never shrink, and only once bound), group login pods, and Pod Security:
the per-user pod is admitted where `restricted` is enforced, the group pod needs `baseline`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sup.reconcile.planner import run_pass
from tests.kube.site import Site
from tests.support.kubeapi import ApiError, KubeApiServer


def _storage(site: Site, name: str) -> str:
    pvc = site.get("pvc", name)
    assert pvc is not None
    return str(pvc["spec"]["resources"]["requests"]["storage"])


def _bind(site: Site, name: str) -> None:
    """What the PV controller does once a volume is provisioned (no controller-manager here)."""
    with site.admin() as admin:
        admin.merge_patch(site.path("pvc", name) + "/status", {"status": {"phase": "Bound"}})


@pytest.fixture
def expandable(kubeapi: KubeApiServer) -> str:
    with kubeapi.admin() as admin:
        if admin.get("/apis/storage.k8s.io/v1/storageclasses/expandable") is None:
            admin.create(
                "/apis/storage.k8s.io/v1/storageclasses",
                {
                    "metadata": {"name": "expandable"},
                    "provisioner": "example.org/none",
                    "allowVolumeExpansion": True,
                },
            )
    return "expandable"


def test_a_home_grows_with_the_setting_and_never_shrinks(
    make_site: Callable[..., Site], expandable: str
) -> None:
    site = make_site(home_storage_class=expandable, home_size="10Gi")
    site.add_user("kim")
    site.converge()

    site.with_kube(home_size="20Gi")
    (report,) = site.plan().changes  # not bound yet: the API server would refuse the resize
    assert report.action == "report" and "once the claim is bound" in report.details_json()["reason"]
    assert _storage(site, site.home("kim")) == "10Gi"

    _bind(site, site.home("kim"))
    (grow,) = site.plan().changes
    assert grow.action == "update"
    assert grow.details_json()["spec.resources.requests.storage"] == {"old": "10Gi", "new": "20Gi"}
    site.converge()
    assert _storage(site, site.home("kim")) == "20Gi"

    site.with_kube(home_size="5Gi")  # smaller: claims are never shrunk
    assert site.plan().changes == []
    assert _storage(site, site.home("kim")) == "20Gi"


def test_immutable_claim_fields_are_reported_not_changed(make_site: Callable[..., Site]) -> None:
    site = make_site(home_storage_class="fast")
    site.add_user("kim")
    site.converge()
    site.with_kube(home_storage_class="slow", home_access_mode="ReadWriteMany")
    plan = site.plan()
    reasons = sorted(c.details_json()["reason"] for c in plan.changes)
    assert [c.action for c in plan.changes] == ["report", "report"]
    assert "accessModes" in reasons[0] and "storageClassName" in reasons[1]
    result = site.reconcile()
    assert result.ok
    pvc = site.get("pvc", site.home("kim"))
    assert pvc is not None and pvc["spec"]["storageClassName"] == "fast"


def test_a_group_gets_a_shared_login_pod_for_its_members(make_site: Callable[..., Site]) -> None:
    site = make_site(
        pod_security="baseline",
        group_pods=["physics", "nosuchgroup"],
        home_access_mode="ReadWriteMany",
        ssh_tcp_forwarding="remote",
        ssh_agent_forwarding=False,
    )
    site.add_user("kim")
    site.add_user("saul")
    site.add_user("zed")
    site.add_group("physics", members=["kim", "saul"])
    plan = site.plan()
    (missing,) = [c for c in plan.changes if c.action == "report"]
    assert missing.name == "nosuchgroup" and "not a group SUP provisions" in missing.details_json()["reason"]
    site.with_kube(group_pods=["physics"])
    site.converge()

    assert {"group-physics"} <= site.names("workload") & site.names("service") & site.names("network_policy")
    files = site.get("login_config", "group-physics")
    assert files is not None  # the members, their groups (members in the pod only) and their keys
    assert [line.split(":")[0] for line in files["data"]["passwd"].splitlines()] == ["kim", "saul"]
    assert f"physics:x:{site.gid('physics')}:kim,saul" in files["data"]["group"].splitlines()
    assert "zed" not in files["data"]["group"] and set(files["data"]) == {
        "passwd",
        "group",
        "kim.keys",
        "saul.keys",
    }
    sts = site.get("workload", "group-physics")
    assert sts is not None
    pod = sts["spec"]["template"]
    assert pod["metadata"]["labels"]["sup/group"] == "physics"
    (container,) = pod["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["SUP_GROUP"] == "physics"
    assert (env["SUP_SSH_ALLOW_TCP_FORWARDING"], env["SUP_SSH_ALLOW_AGENT_FORWARDING"]) == ("remote", "no")
    assert container["securityContext"]["capabilities"]["add"] == [
        "SETUID",
        "SETGID",
        "SYS_CHROOT",
        "AUDIT_WRITE",
        "CHOWN",
    ]
    assert "fsGroup" not in pod["spec"]["securityContext"]  # it would re-own every member's home
    claims = sorted(
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    )
    assert claims == [
        site.home("kim"),
        site.home("saul"),
    ]  # ReadWriteMany homes: the members' own, nobody else's
    service = site.get("service", "group-physics")
    assert service is not None and service["spec"]["selector"] == pod["metadata"]["labels"]

    site.update_group("physics", members=["kim"])  # saul leaves: his home is no longer mounted
    site.converge()
    sts = site.get("workload", "group-physics")
    assert sts is not None
    volumes = sts["spec"]["template"]["spec"]["volumes"]
    assert [v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v] == [
        site.home("kim")
    ]
    files = site.get("login_config", "group-physics")
    assert files is not None and files["data"]["passwd"].startswith("kim:x:") and "saul" not in str(files)

    site.with_kube(group_pods=[])
    plan = site.plan()
    assert sorted((c.action, c.kind, c.name) for c in plan.changes) == [
        ("delete", "login_config", "group-physics"),
        ("delete", "network_policy", "group-physics"),
        ("delete", "service", "group-physics"),
        ("delete", "workload", "group-physics"),
    ]
    assert all(c.subject is None for c in plan.changes)


def _pod_from(site: Site, workload: str, namespace: str | None = None) -> dict[str, Any]:
    """A pod as the StatefulSet controller would create it (there is none here)."""
    sts = site.get("workload", workload)
    assert sts is not None
    template = sts["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{workload}-0", "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    }


def test_the_user_pod_meets_restricted_and_the_group_pod_baseline(
    make_site: Callable[..., Site], kubeapi: KubeApiServer
) -> None:
    restricted = make_site(pod_security="restricted", group_pods=["physics"])
    restricted.add_user("kim")
    restricted.add_group("physics", members=["kim"])
    restricted.reconcile()
    with kubeapi.admin() as admin:
        namespace = admin.get(f"/api/v1/namespaces/{restricted.namespace}")
        assert namespace is not None
        assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
        created = admin.create(restricted.path("pods"), _pod_from(restricted, "login-kim"))
        assert created["metadata"]["name"] == "login-kim-0"  # admitted under `restricted`
        assert admin.warnings == []
        with pytest.raises(ApiError) as refused:
            admin.create(restricted.path("pods"), _pod_from(restricted, "group-physics"))
    assert refused.value.status == 403 and 'violates PodSecurity "restricted' in refused.value.message
    # the namespace's `warn` label made the API server say so when SUP applied the group StatefulSet,
    # and say nothing about the user's
    warnings = restricted.targets[-1].client.warnings
    assert warnings and all("group-physics" in w or "restricted" in w for w in warnings)
    assert len(warnings) == 1

    baseline = make_site(pod_security="baseline", group_pods=["physics"])  # the same store
    baseline.converge()
    with kubeapi.admin() as admin:
        created = admin.create(baseline.path("pods"), _pod_from(baseline, "group-physics"))
        assert created["metadata"]["name"] == "group-physics-0"


def test_a_write_that_touches_a_group_pod_gets_a_full_read(make_site: Callable[..., Site]) -> None:
    """A pass after writes may read only the users they named (run_pass scoped=True), but not when a
    group login pod mounts a named user's home: the group pod must follow its members."""
    site = make_site(pod_security="baseline", group_pods=["physics"], home_access_mode="ReadWriteMany")
    site.add_user("kim")
    site.add_group("physics", members=["kim"])
    site.converge()
    assert run_pass(site.settings, site.sessions, apply=True, opener=site._open).ok  # clears the outbox
    site.add_user("saul", groups=["physics"])

    result = run_pass(site.settings, site.sessions, apply=True, scoped=True, opener=site._open)
    (kube,) = [t for t in result.targets if t.target == "kube"]
    assert not kube.scoped
    assert ("update", "workload", "group-physics") in {(c.action, c.kind, c.name) for c in kube.changes}
    sts = site.get("workload", "group-physics")
    assert sts is not None
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in sts["spec"]["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert site.home("saul") in claims
