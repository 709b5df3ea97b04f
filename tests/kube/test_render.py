"""Templates: values cannot change the YAML's structure, operators can replace a template, and a broken
template stops the target with a message naming it, before anything is read or written (pure)."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from sup.config import Settings
from sup.config.targets import target_context
from sup.targets.base import TargetError
from sup.targets.kube import SPEC, KubeSettings, KubeTarget
from sup.targets.kube.model import Observed
from sup.targets.kube.render import Renderer, TemplateError, shipped_templates
from sup.targets.kube.template_values import (
    GroupName,
    GroupValues,
    Member,
    ObjectNames,
    OwnerValues,
    Person,
    TemplateContext,
    UserValues,
)
from sup.targets.spec import TargetContext
from tests.kube.plans import group, settings, state, user
from tests.support.kubeapi import KubeApiServer


def test_values_are_data_never_yaml() -> None:
    sly = replace(user("kim"), home_directory='/home/kim"\n    hostPath: {path: /}\nx: "')
    workload = next(w for w in Renderer(settings()).user_login(sly) if w.kind == "workload")
    spec = workload.manifest["spec"]["template"]["spec"]
    assert spec["containers"][0]["volumeMounts"][0] == {"name": "home", "mountPath": sly.home_directory}
    assert [v["name"] for v in spec["volumes"]] == ["home", "login"] and "x" not in workload.manifest


def test_an_operator_template_replaces_the_shipped_one(tmp_path: Path) -> None:
    (tmp_path / "service.yaml.j2").write_text(
        """# an operator's own, in YAML
apiVersion: v1
kind: Service
metadata:
  name: {{ names.login | tojson }}
  labels: {team: hpc}
  annotations: {note: mine}
spec:
  type: NodePort
  selector: {{ pod_labels | tojson }}
  ports:
    - {name: ssh, port: 22, targetPort: {{ settings.ssh_port }}, protocol: TCP, nodePort: 30022}
"""
    )
    renderer = Renderer(settings(templates_dir=str(tmp_path)))
    service = next(w for w in renderer.user_login(user("kim")) if w.kind == "service").manifest
    assert service["metadata"]["annotations"]["note"] == "mine"
    assert service["spec"]["ports"][0] == {
        "name": "ssh",
        "port": 22,
        "targetPort": 2222,
        "protocol": "TCP",
        "nodePort": 30022,
    }
    # SUP's own labels are set whatever the template says
    assert service["metadata"]["labels"] == {
        "team": "hpc", "app.kubernetes.io/managed-by": "sup", "app.kubernetes.io/component": "login",
        "sup/user": "kim",
    }  # fmt: skip
    assert Renderer(settings(templates_dir=str(tmp_path))).home(user("kim")).name == "home-u10000"  # shipped


def test_the_shipped_templates_are_json_and_yaml_alike() -> None:
    renderer = Renderer(
        settings(ssh_sources=["203.0.113.0/24"], ldap_cidrs=["10.0.0.0/8"], egress_cidrs=["0.0.0.0/0"])
    )
    kim = user("kim")
    templates = sorted(shipped_templates().glob("*.yaml.j2"))
    homes = ((None, None), ("homes", "kim"))  # the claim mode; the shared mode (claim, subPath)
    for template, idle_port, (shared, sub) in itertools.product(templates, (None, 9101), homes):
        person = Person("kim", 1, 1, "/h", "/s", supplemental_gids=(7,), home_sub_path=sub)
        member = Member("kim", 1, 1, "/h", "/s", home_sub_path=sub, claim=shared or "home-kim")
        context = TemplateContext(
            namespace="n", owner=OwnerValues("user", "kim", "kim"),
            names=ObjectNames(home="home-kim", login="login-kim", key="kim"), pod_labels={"a": "b"},
            settings=renderer.values, network=renderer.network, idle_port=idle_port,
            subject=UserValues(person),
        )  # fmt: skip
        group_values = GroupValues(GroupName("g", 5), (member,), shared)
        variables = {**context.variables(), **replace(context, subject=group_values).variables()}
        text = renderer.environment.get_template(template.name).render(variables)
        assert json.loads(text) == yaml.safe_load(text), template.name
    assert renderer.home(kim).manifest["spec"]["resources"]["requests"]["storage"] == "10Gi"


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
        _context({"namespace": "research", "templates_dir": str(tmp_path)}), client=_no_client()
    )
    with pytest.raises(TargetError) as info:
        target.diff(state(user("kim")), Observed())
    assert message in str(info.value) and "service.yaml.j2" in str(info.value)


def test_a_missing_templates_dir_is_refused_at_open(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="is not a directory"):
        KubeTarget(
            _context({"namespace": "research", "templates_dir": str(tmp_path / "nope")}),
            client=_no_client(),
        )
    with pytest.raises(TemplateError):
        Renderer(settings(templates_dir=str(tmp_path / "nope")))


def test_no_kubeconfig_outside_a_pod_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(TargetError, match="SUP_KUBE__KUBECONFIG"):
        KubeTarget(_context({"namespace": "research"}))
    with pytest.raises(TargetError, match="not a readable file"):
        KubeTarget(_context({"namespace": "research", "kubeconfig": str(tmp_path / "missing")}))
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    with pytest.raises(TargetError, match="cannot load the Kubernetes configuration"):
        KubeTarget(_context({"namespace": "research", "kubeconfig": str(broken)}))


def test_a_group_pod_mounts_only_its_own_host_key_from_the_sites_secret() -> None:
    renderer = Renderer(settings(group_pods=["lab"], group_host_key_secret="group-host-keys"))
    (workload,) = [
        w for w in renderer.group_login(group("lab", 20001, "kim"), [user("kim")]) if w.kind == "workload"
    ]
    pod = workload.manifest["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "host-key"]
    assert volume["secret"] == {
        "secretName": "group-host-keys",
        "defaultMode": 0o400,
        "optional": True,  # a group without a key still starts, with a key of its own
        "items": [{"key": "lab", "path": "sup_login_host_ed25519_key"}],
    }
    sshd = pod["containers"][0]
    assert {"name": "host-key", "mountPath": "/etc/sup/host-key", "readOnly": True} in sshd["volumeMounts"]
    assert {"name": "SUP_HOST_KEY_DIR", "value": "/etc/sup/host-key"} in sshd["env"]
    # a user's pod keeps its key in the home, never from this Secret
    mine = next(w for w in renderer.user_login(user("kim")) if w.kind == "workload").manifest
    assert "group-host-keys" not in json.dumps(mine)


def test_egress_that_reaches_the_api_server_stops_the_target_until_it_is_carved_out(
    kubeapi: KubeApiServer,
) -> None:
    """The test API server listens on 127.0.0.1: egress_cidrs 127.0.0.0/8 would let login pods reach
    it. A clear terminal error before anything is read; with the address in cluster_cidrs it opens."""
    kube = {"namespace": "research", "kubeconfig": str(kubeapi.admin_kubeconfig)}
    with pytest.raises(
        TargetError,
        match=r"egress_cidrs 127.0.0.0/8 lets login pods reach the Kubernetes API server at 127.0.0.1",
    ) as info:
        KubeTarget(_context({**kube, "egress_cidrs": ["127.0.0.0/8"]}))
    assert info.value.terminal
    KubeTarget(_context({**kube, "egress_cidrs": ["127.0.0.0/8"], "cluster_cidrs": ["127.0.0.1/32"]})).close()


def _context(kube: dict[str, Any]) -> TargetContext[KubeSettings]:
    return target_context(SPEC, Settings(kube=kube))


def _no_client() -> Any:
    """Stands in for the connection in tests that must fail before any request."""

    class NoClient:
        def close(self) -> None:
            pass

    return NoClient()


def _forwarding_env(workload: dict[str, Any]) -> dict[str, str]:
    (container,) = [c for c in workload["spec"]["template"]["spec"]["containers"] if c["name"] == "sshd"]
    return {e["name"]: e["value"] for e in container["env"] if "FORWARDING" in e["name"]}


@pytest.mark.parametrize(
    ("kube", "expected"),
    [
        ({}, {"SUP_SSH_ALLOW_TCP_FORWARDING": "local", "SUP_SSH_ALLOW_AGENT_FORWARDING": "yes"}),
        (
            {"ssh_tcp_forwarding": "no", "ssh_agent_forwarding": False},
            {"SUP_SSH_ALLOW_TCP_FORWARDING": "no", "SUP_SSH_ALLOW_AGENT_FORWARDING": "no"},
        ),
        (
            {"ssh_tcp_forwarding": "yes"},
            {"SUP_SSH_ALLOW_TCP_FORWARDING": "yes", "SUP_SSH_ALLOW_AGENT_FORWARDING": "yes"},
        ),
    ],
)
def test_forwarding_settings_reach_user_and_group_pods(
    kube: dict[str, Any], expected: dict[str, str]
) -> None:
    """The login image turns these into sshd's AllowTcpForwarding and AllowAgentForwarding."""
    renderer = Renderer(settings(**kube))
    mine = next(w for w in renderer.user_login(user("kim")) if w.kind == "workload")
    shared = next(
        w for w in renderer.group_login(group("physics", 20000, "kim"), [user("kim")]) if w.kind == "workload"
    )
    assert _forwarding_env(mine.manifest) == expected
    assert _forwarding_env(shared.manifest) == expected


def _site_objects(**kwargs: Any) -> list[dict[str, Any]]:
    """A fixed site's login objects: kim's home and pod, and group lab's pod (kim and saul)."""
    renderer = Renderer(
        settings(ssh_sources=["203.0.113.0/24"], ldap_cidrs=["10.0.0.0/8"], group_pods=["lab"])
    )
    kim, saul = user("kim", 10000), user("saul", 10001)
    found = [renderer.home(kim).manifest]
    found += [w.manifest for w in renderer.user_login(kim, groups=(20001,), **kwargs)]
    found += [
        w.manifest for w in renderer.group_login(group("lab", 20001, "kim", "saul"), [kim, saul], **kwargs)
    ]
    return found


def test_without_the_gateways_idle_sleep_the_login_objects_are_as_before() -> None:
    # the fixture is this site rendered by the code before the idle reporter existed (its Services
    # since made headless: clusterIP None)
    before = json.loads(
        (Path(__file__).parent / "fixtures" / "login-objects-without-gateway.json").read_text()
    )
    assert _site_objects() == before
    assert _site_objects(idle_port=None) == before


def test_with_idle_sleep_the_pod_runs_the_reporter_and_its_service_has_an_idle_port() -> None:
    before, after = _site_objects(), _site_objects(idle_port=9101)
    assert [m["kind"] for m in after] == [m["kind"] for m in before]
    for old, new in zip(before, after, strict=True):
        if new["kind"] == "StatefulSet":
            container = new["spec"]["template"]["spec"]["containers"][0]
            assert container["env"][-1] == {"name": "SUP_IDLE_PORT", "value": "9101"}
            assert container["ports"] == [
                {"name": "ssh", "containerPort": 2222, "protocol": "TCP"},
                {"name": "idle", "containerPort": 9101, "protocol": "TCP"},
            ]
            old_container = old["spec"]["template"]["spec"]["containers"][0]
            assert container["env"][:-1] == old_container["env"]
            assert {**container, "env": [], "ports": []} == {**old_container, "env": [], "ports": []}
        elif new["kind"] == "Service":
            assert new["spec"]["ports"] == [
                {"name": "ssh", "port": 22, "targetPort": 2222, "protocol": "TCP"},
                {"name": "idle", "port": 9101, "targetPort": 9101, "protocol": "TCP"},
            ]
        else:  # the NetworkPolicy does not open the idle port to ssh_sources (the chart's admits the gateway)
            assert new == old, new["kind"]
