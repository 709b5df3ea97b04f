"""The `kube` settings: defaults, and bad values refused with the key named (pure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sup.config import Settings, load_settings


def _kube(**values: object) -> Settings:
    return Settings(kube={"namespace": "research", **values})


def test_the_contract_keys_enable_the_target_with_safe_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUP_KUBE__NAMESPACE", "research")
    monkeypatch.setenv("SUP_KUBE__KUBECONFIG", "/etc/sup/kubeconfig")
    monkeypatch.setenv("SUP_KUBE__SSH_SOURCES", '["203.0.113.0/24"]')
    settings = load_settings()
    kube = settings.kube
    assert kube is not None and settings.target_enabled("kube")
    assert (kube.namespace, kube.kubeconfig) == ("research", "/etc/sup/kubeconfig")
    assert (kube.cpu, kube.memory) == ("4", "8Gi")  # login pods: 4 CPU / 8Gi
    assert kube.pvc_retention == "keep" and kube.service_type == "ClusterIP"
    assert kube.ssh_sources == ["203.0.113.0/24"]
    assert "169.254.169.254/32" in kube.blocked_cidrs
    assert kube.field_manager == "sup" and kube.ssh_port == 2222
    assert (kube.ssh_tcp_forwarding, kube.ssh_agent_forwarding) == ("local", True)


@pytest.mark.parametrize(
    ("values", "field", "message"),
    [
        ({"namespace": "Research"}, "namespace", "lower-case"),
        ({"home_size": "ten gigs"}, "home_size", "not a Kubernetes quantity"),
        ({"memory": "0"}, "memory", "greater than zero"),
        ({"pvc_retention": "a month"}, "pvc_retention", "'keep' or a duration"),
        ({"ssh_sources": ["10.0.0.1/8"]}, "ssh_sources", "not a CIDR"),
        ({"egress_cidrs": ["169.254.169.254/32"]}, "kube", "cannot be carved out"),
        ({"egress_cidrs": ["10.96.0.0/16"], "cluster_cidrs": ["10.96.0.0/12"]}, "kube", "cluster's range"),
        ({"egress_cidrs": ["10.0.0.0/8"], "cluster_cidrs": ["10.0.0.0/8"]}, "kube", "cluster's range"),
        ({"cluster_cidrs": ["10.96.0.1/12"]}, "cluster_cidrs", "not a CIDR"),
        ({"node_selector": {"bad key!": "x"}}, "node_selector", "label key"),
        ({"group_pods": ["Physics"]}, "group_pods", "group in group_pods"),
        ({"ssh_port": 22}, "ssh_port", "greater than or equal to 1024"),
        ({"service_type": "ExternalName"}, "service_type", "ClusterIP"),
        ({"cpu": "2", "cpu_request": "3"}, "kube", "more than cpu"),
        ({"image": "has space"}, "image", "without spaces"),
        ({"unknown": 1}, "unknown", "Extra inputs"),
        ({"ssh_tcp_forwarding": "all"}, "ssh_tcp_forwarding", "'yes', 'local', 'remote' or 'no'"),
        ({"ssh_agent_forwarding": "sometimes"}, "ssh_agent_forwarding", "valid boolean"),
        ({"home_mode": "nfs"}, "home_mode", "'claim' or 'shared'"),
        ({"home_mode": "shared"}, "kube", "kube.shared_home_claim is not set"),
        ({"shared_home_claim": "homes"}, "kube", "but kube.home_mode is claim"),
        ({"home_mode": "shared", "shared_home_claim": "Homes"}, "shared_home_claim", "lower-case"),
        ({"home_mode": "shared", "shared_home_claim": "h", "home_root": "/"}, "home_root", "must not be /"),
        ({"home_mode": "shared", "shared_home_claim": "h", "home_root": "home"}, "home_root", "absolute"),
        ({"home_mode": "shared", "shared_home_claim": "h", "home_root": "/home/"}, "home_root", "plain path"),
        ({"home_root": "/srv/../etc"}, "home_root", "plain path"),
    ],
)
def test_bad_values_are_refused_naming_the_key(values: dict[str, object], field: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        _kube(**values)
    errors = info.value.errors(include_input=False)
    assert any(field in [str(p) for p in e["loc"]] and message in e["msg"] for e in errors), errors


def test_the_home_mode_is_a_claim_per_person_unless_the_site_names_its_shared_claim() -> None:
    kube = _kube().kube
    assert kube is not None and (kube.home_mode, kube.shared_home_claim, kube.home_root) == (
        "claim", None, "/home",
    )  # fmt: skip
    shared = _kube(home_mode="shared", shared_home_claim="cluster-homes", home_root="/shared/home").kube
    assert shared is not None
    assert (shared.home_mode, shared.shared_home_claim, shared.home_root) == (
        "shared", "cluster-homes", "/shared/home",
    )  # fmt: skip


def test_an_allowed_cidr_around_the_metadata_address_is_fine() -> None:
    kube = _kube(egress_cidrs=["0.0.0.0/0", "169.254.0.0/16"]).kube
    assert kube is not None and kube.egress_cidrs == ["0.0.0.0/0", "169.254.0.0/16"]


def test_forwarding_written_as_yaml_yes_or_no_means_the_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unquoted `no` is a boolean to YAML 1.1: the setting takes it as sshd's word."""
    config = tmp_path / "sup.yaml"
    config.write_text("kube:\n  namespace: research\n  ssh_tcp_forwarding: no\n  ssh_agent_forwarding: no\n")
    monkeypatch.setenv("SUP_CONFIG", str(config))
    kube = load_settings().kube
    assert kube is not None
    assert (kube.ssh_tcp_forwarding, kube.ssh_agent_forwarding) == ("no", False)
    yes = _kube(ssh_tcp_forwarding=True).kube
    assert yes is not None and yes.ssh_tcp_forwarding == "yes"


def test_the_clusters_ranges_inside_an_egress_cidr_are_carved_out_of_it() -> None:
    from sup.targets.kube.render import Renderer

    kube = _kube(egress_cidrs=["0.0.0.0/0"], cluster_cidrs=["10.96.0.0/12", "192.168.0.0/16"]).kube
    assert kube is not None
    assert kube.ldap_cidrs == []  # login pods read SUP's maps: no LDAP egress unless a site asks
    (policy,) = [w for w in Renderer(kube).user_login(_person()) if w.kind == "network_policy"]
    (everywhere,) = [r for r in policy.manifest["spec"]["egress"] if "ports" not in r]
    assert everywhere["to"] == [
        {
            "ipBlock": {
                "cidr": "0.0.0.0/0",
                "except": ["169.254.169.254/32", "10.96.0.0/12", "192.168.0.0/16"],
            }
        }
    ]


def _person() -> Any:
    from tests.kube.plans import user

    return user("kim")
