"""Slurm in a login pod: slurm.conf from the site's ConfigMap, munge in a sidecar that alone holds the
key, and the NetworkPolicy that lets srun reach slurmctld and slurmd and lets them connect back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from sup.config import Settings
from sup.targets.kube.model import Observed
from tests.kube.plans import diff, settings, state, user
from tests.kube.site import Site
from tests.support.kubeapi import KubeApiServer

SLURM: dict[str, Any] = {
    "slurm_config_map": "slurm-config",
    "munge_key_secret": "munge-key",
    "slurmctld_cidrs": ["10.9.0.10/32"],
    "slurmd_cidrs": ["10.8.0.0/24"],
    "srun_port_range": "60001-63000",
}


def _manifest(kind: str, **kube: Any) -> dict[str, Any]:
    (change,) = [c for c in diff(state(user("kim")), Observed(), settings(**kube)) if c.kind == kind]
    manifest: dict[str, Any] = change.details_json()["manifest"]
    return manifest


def _secrets_of(container: dict[str, Any], pod: dict[str, Any]) -> set[str]:
    secret_volumes = {v["name"] for v in pod["volumes"] if "secret" in v}
    return {m["name"] for m in container.get("volumeMounts", []) if m["name"] in secret_volumes}


def test_without_slurm_settings_the_pod_has_one_container_and_no_slurm_volume() -> None:
    pod = _manifest("workload")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["sshd"]
    assert [v["name"] for v in pod["volumes"]] == ["home", "login"]


def test_the_munge_key_is_mounted_into_the_sidecar_only() -> None:
    pod = _manifest("workload", **SLURM)["spec"]["template"]["spec"]
    login, munge = pod["containers"]
    assert (login["name"], munge["name"]) == ("sshd", "munge")
    assert _secrets_of(login, pod) == set() and _secrets_of(munge, pod) == {"munge-key"}
    assert {"name": "slurm", "mountPath": "/etc/slurm", "readOnly": True} in login["volumeMounts"]
    assert {"name": "munge-socket", "mountPath": "/run/munge", "readOnly": True} in login["volumeMounts"]
    assert {"name": "munge-socket", "mountPath": "/run/munge"} in munge["volumeMounts"]
    assert munge["image"] == login["image"] and munge["command"] == ["/usr/local/sbin/sup-munged"]
    security = munge["securityContext"]
    assert security["runAsUser"] == 994 and security["runAsGroup"] == 994 and security["runAsNonRoot"]
    assert security["allowPrivilegeEscalation"] is False and security["capabilities"] == {"drop": ["ALL"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["slurm"]["configMap"] == {"name": "slurm-config"}
    assert volumes["munge-key"]["secret"]["secretName"] == "munge-key"
    assert volumes["munge-key"]["secret"]["items"] == [{"key": "munge.key", "path": "munge.key"}]
    assert "emptyDir" in volumes["munge-socket"] and not pod.get("shareProcessNamespace")


def test_the_group_pod_gets_the_same_sidecar() -> None:
    from tests.kube.plans import group

    desired = state(user("kim"), groups=(group("physics", 50000, "kim"),))
    changes = diff(desired, Observed(), settings(group_pods=["physics"], **SLURM))
    (workload,) = [c for c in changes if c.kind == "workload" and c.name == "group-physics"]
    pod = workload.details_json()["manifest"]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["sshd", "munge", "munge-guard"]
    assert _secrets_of(pod["containers"][0], pod) == set()
    # sshd runs as root there: its socket is the guard's, munged's own is on a volume sshd lacks
    _, munged, guard = pod["containers"]
    mounts = {c["name"]: {m["name"] for m in c["volumeMounts"]} for c in pod["containers"]}
    assert (
        "munged-socket" not in mounts["sshd"] and {"munge-socket", "munged-socket"} <= mounts["munge-guard"]
    )
    assert "munge-socket" not in mounts["munge"]
    assert guard["command"] == ["/usr/local/sbin/sup-munge-guard"]
    assert guard["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SETUID", "SETGID"]}
    guard_env = {e["name"]: e["value"] for e in guard["env"]}
    assert (guard_env["SUP_MUNGE_MIN_UID"], guard_env["SUP_MUNGE_DENY_UIDS"]) == ("1000", "994")
    assert {e["name"]: e["value"] for e in munged["env"]}["SUP_MUNGE_SOCKET"] == "/run/munged/munge.socket.2"
    # No fsGroup in a group's pod (it would re-own members' homes), so the Secret stays root's 0400:
    # an init container copies it as the sidecar's, and only it mounts the Secret.
    assert "fsGroup" not in pod["securityContext"]
    (init,) = pod["initContainers"]
    assert _secrets_of(init, pod) == {"munge-key"} and _secrets_of(pod["containers"][1], pod) == set()
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert "chown 994:994 /var/lib/munge/munge.key" in init["command"][-1]
    munge_env = {e["name"]: e["value"] for e in pod["containers"][1]["env"]}
    assert munge_env["SUP_MUNGE_KEY"] == "/var/lib/munge/munge.key"
    assert {"name": "munge-state", "mountPath": "/var/lib/munge"} in init["volumeMounts"]


def test_srun_reaches_slurmctld_and_slurmd_and_they_connect_back_on_the_srun_ports() -> None:
    policy = _manifest("network_policy", ssh_sources=["203.0.113.0/24"], **SLURM)["spec"]
    ssh, srun = policy["ingress"]
    assert ssh["ports"] == [{"protocol": "TCP", "port": 2222}]
    assert srun == {
        "from": [{"ipBlock": {"cidr": "10.9.0.10/32"}}, {"ipBlock": {"cidr": "10.8.0.0/24"}}],
        "ports": [{"protocol": "TCP", "port": 60001, "endPort": 63000}],
    }
    egress = {tuple(p["ipBlock"]["cidr"] for p in r["to"] if "ipBlock" in p): r for r in policy["egress"]}
    assert egress["10.9.0.10/32",]["ports"] == [{"protocol": "TCP", "port": 6817}]
    assert egress["10.8.0.0/24",]["ports"] == [{"protocol": "TCP", "port": 6818}]
    # no ssh sources: the srun rule alone
    (only,) = _manifest("network_policy", **SLURM)["spec"]["ingress"]
    assert only == srun


@pytest.mark.parametrize(
    ("kube", "message"),
    [
        ({"slurm_config_map": "slurm"}, "go together"),
        ({"munge_key_secret": "munge"}, "go together"),
        ({"slurmd_cidrs": ["10.8.0.0/24"]}, "srun_port_range is not"),
        ({"srun_port_range": "63000-60001"}, "first port not above its last"),
        ({"srun_port_range": "80-90"}, "within 1024-65535"),
        ({"srun_port_range": "60001"}, "port range such as"),
        ({"slurmd_ports": [0]}, "between 1 and 65535"),
        ({"slurm_config_map": "Slurm_Conf", "munge_key_secret": "m"}, "ConfigMap name"),
        ({"munge_uid": 0, **SLURM}, "greater than or equal to 1"),
        ({"slurmd_cidrs": ["169.254.169.254/32"], "srun_port_range": "60001-60010"}, "blocked"),
    ],
)
def test_slurm_settings_are_checked(kube: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as error:
        settings(**kube)
    assert message in str(error.value)


def test_the_munge_uid_must_lie_outside_sups_uid_ranges() -> None:
    with pytest.raises(ValidationError) as error:
        Settings(kube={"namespace": "research", **SLURM, "munge_uid": 10500})
    assert "uid 10500, which lies in SUP's uid range 10000-49999" in str(error.value)
    supplied = {"supplied_uid_ranges": [{"min": 900, "max": 999}]}
    with pytest.raises(ValidationError) as error:
        Settings(ids=supplied, kube={"namespace": "research", **SLURM})
    assert "uid 994" in str(error.value)
    assert Settings(kube={"namespace": "research", **SLURM}).kube is not None  # 994: outside
    # without munge the uid runs nothing: no conflict to refuse
    assert Settings(ids=supplied, kube={"namespace": "research"}).kube is not None


def _pod_from(site: Site, workload: str) -> dict[str, Any]:
    sts = site.get("workload", workload)
    assert sts is not None
    template = sts["spec"]["template"]
    return {
        "metadata": {"name": f"{workload}-0", "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    }


def test_with_slurm_the_user_pod_still_meets_restricted(
    make_site: Callable[..., Site], kubeapi: KubeApiServer
) -> None:
    site = make_site(pod_security="restricted", **SLURM)
    site.add_user("kim")
    site.converge()  # the first pass converges, the second writes nothing
    with kubeapi.admin() as admin:
        created = admin.create(site.path("pods"), _pod_from(site, "login-kim"))
        assert [c["name"] for c in created["spec"]["containers"]] == ["sshd", "munge"]  # admitted
        assert admin.warnings == []
    policy = site.get("network_policy", "login-kim")
    assert policy is not None
    assert policy["spec"]["ingress"][-1]["ports"] == [{"protocol": "TCP", "port": 60001, "endPort": 63000}]
