"""SUP's chart as Helm users expect it (issue 25): values checked against values.schema.json (a
misspelt key fails `helm lint` and `helm install` naming it), a `helm test` hook, memory sized from
BENCHMARKS.md (docs/sizing.md), PodDisruptionBudgets and the gateway's anti-affinity, NOTES with the
next step, and an upgrade from the previous chart version that leaves SUP's settings, which the
login pods are made from, as they were for the same values."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from sup.reconcile.worker import WorkerState
from sup.targets.registry import TARGET_NAMES
from tests.e2e.test_chart_install import values as e2e_values
from tests.support.helm import CHART, helm, render
from tests.support.kubeapi import KubeApiServer
from tests.support.kubenode import KubeCluster

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())
GATEWAY = "gateway.enabled=true"


def _failed(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout
    return result.stdout + result.stderr


# --- values.schema.json ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "where", "key"),
    [
        ("replicaCont=2", "at ''", "replicaCont"),
        ("gateway.enabeld=true", "at '/gateway'", "enabeld"),
        ("kube.setings.ssh_port=2200", "at '/kube'", "setings"),
        ("secrets.databaseUrl.nmae=db", "at '/secrets/databaseUrl'", "nmae"),
        ("monitoring.prometheusRule.enable=true", "at '/monitoring/prometheusRule'", "enable"),
        ("gateway.service.nodeport=30022", "at '/gateway/service'", "nodeport"),
    ],
)
def test_a_misspelt_key_fails_lint_and_install_naming_it(
    helm_binary: str, setting: str, where: str, key: str
) -> None:
    lint = _failed(helm(helm_binary, "lint", "--strict", str(CHART), "--set", setting))
    assert f"{where}: additional properties '{key}' not allowed" in lint
    # `helm template` validates as `helm install` does, before anything reaches the cluster
    template = _failed(helm(helm_binary, "template", "sup", str(CHART), "--set", setting))
    assert f"additional properties '{key}' not allowed" in template


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("replicaCount=two", "at '/replicaCount': got string, want integer"),
        ("image.pullPolicy=Sometimes", "at '/image/pullPolicy': value must be one of"),
        ("gateway.service.port=70000", "at '/gateway/service/port': maximum: got 70,000, want 65,535"),
        ("kube.enabled=yes please", "at '/kube/enabled': got string, want boolean"),
        ("resources.limits.memory=true", "at '/resources/limits/memory': got boolean, want number or string"),
    ],
)
def test_a_value_of_the_wrong_type_fails_naming_the_key(helm_binary: str, setting: str, message: str) -> None:
    assert message in _failed(helm(helm_binary, "lint", "--strict", str(CHART), "--set", setting))


class _Node:
    """What the real-node chart test's values read of its node (KubeCluster.login_settings)."""

    storage_class = "local-path"
    node_ip = "192.0.2.10"

    def login_settings(self, image: str) -> dict[str, Any]:
        return KubeCluster.login_settings(cast(KubeCluster, self), image)


def test_the_defaults_and_the_real_install_tests_values_pass(helm_binary: str, tmp_path: Path) -> None:
    """The values tests/e2e/test_chart_install.py installs with, with the gateway turned on as it
    does, and free-form sections (SUP's settings) pass."""
    installed = e2e_values(cast(KubeCluster, _Node()), "localhost/sup-login:test")
    installed["gateway"] = {  # as gateway_on() upgrades the release
        "enabled": True,
        "replicaCount": 1,
        "settings": {"workers": 1},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    }
    free_form = {
        "config": {"ldap": {"url": "ldaps://ldap.example.org"}, "anything": {"nested": [1, 2]}},
        "kube": {"settings": {"home_mode": "shared", "ssh_sources": ["203.0.113.0/24"]}},
        "slurm": {"mungeUid": 995, "slurmConf": {"configMap": "slurm-conf"}},
        "homes": {"quota": "none", "settings": {"resync_seconds": 600}},
        "gateway": {"nodeSelector": {"role": "edge"}, "service": {"nodePort": 30022}},
    }
    for name, values in [("defaults", {}), ("installed", installed), ("free", free_form)]:
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(values))
        result = helm(helm_binary, "lint", "--strict", str(CHART), "--values", str(path))
        assert result.returncode == 0, (name, result.stdout + result.stderr)


def _leaves(values: dict[str, Any], schema: dict[str, Any], path: str = "") -> Iterator[str]:
    """Each key of `values` (nested) the schema does not describe: not a property of its object,
    and its object not free-form (free-form: no `properties`, so any key goes)."""
    for key, value in values.items():
        here = f"{path}.{key}" if path else key
        node = schema.get("properties", {}).get(key)
        if node is None:
            yield here
            continue
        node = SCHEMA["definitions"][node["$ref"].rsplit("/", 1)[1]] if "$ref" in node else node
        if isinstance(value, dict) and "properties" in node:
            yield from _leaves(value, node, here)


def test_the_schema_describes_every_key_of_values_yaml() -> None:
    """A key added to values.yaml without its place in the schema would fail every install that
    sets it (additionalProperties is false where people type): caught here instead."""
    assert list(_leaves(DEFAULTS, SCHEMA)) == []
    # and it is closed at each level people type, open where SUP's settings pass through
    assert SCHEMA["additionalProperties"] is False
    for section in ("image", "kube", "gateway", "secrets", "migration", "helmTest", "monitoring", "slurm",
                    "homes"):  # fmt: skip
        assert SCHEMA["properties"][section]["additionalProperties"] is False, section
    for free in ("config",):
        assert "properties" not in SCHEMA["properties"][free], free
    assert "properties" not in SCHEMA["properties"]["kube"]["properties"]["settings"]
    assert "properties" not in SCHEMA["properties"]["gateway"]["properties"]["settings"]
    assert "properties" not in SCHEMA["properties"]["homes"]["properties"]["settings"]


# --- `helm test` ------------------------------------------------------------------------------------


def _test_pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (pod,) = [o for o in objects if o["kind"] == "Pod"]
    return pod


def _env(pod: dict[str, Any]) -> dict[str, str]:
    (container,) = pod["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"]}


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        present = expression["key"] in labels
        if expression["operator"] == "DoesNotExist" and present:
            return False
        if expression["operator"] == "In" and labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def test_the_helm_test_pod_runs_the_check_in_sups_image_against_its_services(helm_binary: str) -> None:
    objects = render(helm_binary, "sup-system")
    pod = _test_pod(objects)
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    spec = pod["spec"]
    (container,) = spec["containers"]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    assert container["image"] == deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert container["command"] == [
        "/opt/sup/bin/python",
        "-c",
        (CHART / "files" / "helm-test.py").read_text(),
    ]
    assert spec["restartPolicy"] == "Never" and spec["automountServiceAccountToken"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert _env(pod) == {"SUP_URL": "http://sup.sup-system.svc:8080", "GATEWAY": "", "TIMEOUT_SECONDS": "120"}
    # not one of SUP's pods: the Service does not send it requests, the budget does not count it
    (service,) = [o for o in objects if o["kind"] == "Service"]
    assert not _selects({"matchLabels": service["spec"]["selector"]}, pod["metadata"]["labels"])

    objects = render(helm_binary, "sup-system", GATEWAY, "service.port=8081", "helmTest.timeoutSeconds=30")
    assert _env(_test_pod(objects)) == {
        "SUP_URL": "http://sup.sup-system.svc:8081",
        "GATEWAY": "sup-gateway.sup-system.svc:22",  # the gateway Service's port, in the cluster
        "TIMEOUT_SECONDS": "30",
    }


def test_the_gateways_network_policy_lets_the_helm_test_pod_reach_its_port(helm_binary: str) -> None:
    """Default sshFrom (anywhere) admits it already; a site's sshFrom gets the test pod besides, on
    the ssh port only."""
    for settings in ([], ["gateway.networkPolicy.sshFrom[0].ipBlock.cidr=198.51.100.0/24"]):
        objects = render(helm_binary, "sup-system", GATEWAY, "gateway.settings.listen_port=2022", *settings)
        labels = _test_pod(objects)["metadata"]["labels"]
        (policy,) = [o for o in objects if o["metadata"]["name"] == "sup-gateway-pods"]
        admitting = [
            rule
            for rule in policy["spec"]["ingress"]
            if "from" not in rule
            or any("podSelector" in p and _selects(p["podSelector"], labels) for p in rule["from"])
        ]
        assert [[p["port"] for p in rule["ports"]] for rule in admitting] == [[2022]], settings


def _fake_sup(bodies: list[tuple[int, dict[str, Any]]]) -> tuple[ThreadingHTTPServer, str]:
    """An HTTP server answering /readyz with each of `bodies` in turn, then the last one again."""
    answers = list(bodies)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = answers.pop(0) if len(answers) > 1 else answers[0]
            payload = json.dumps(body).encode()
            self.send_response(status if self.path == "/readyz" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _readyz(
    role: str, passed: Mapping[str, tuple[str, str | None]] | None, status: str = "ready"
) -> dict[str, Any]:
    """A /readyz body as sup/api/health.py builds it: ldap and kube configured, the rest disabled."""
    configured = {"ldap", "kube"}
    state = WorkerState(role=role)
    if passed is not None:
        state.last_pass_at = time.time() - 5
        state.targets = {t: {"state": s, "error": e} for t, (s, e) in passed.items()}
    return {
        "status": status,
        "database": {"state": "ok", "revision": "abc", "head": "abc"},
        "targets": {t: "configured" if t in configured else "disabled" for t in TARGET_NAMES},
        "sources": {"keycloak": "disabled"},
        "reconciler": state.as_json(),
    }


def _run_check(sup_url: str, gateway: str = "", timeout: float = 4) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SUP_URL": sup_url, "GATEWAY": gateway, "TIMEOUT_SECONDS": str(timeout)}
    script = (CHART / "files" / "helm-test.py").read_text()
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_the_helm_test_check_asks_until_the_leader_answers_and_names_an_unreachable_target() -> None:
    fine = {"ldap": ("applied", None), "kube": ("planned", None), "slurm": ("disabled", None)}
    server, url = _fake_sup([(200, _readyz("standby", None)), (200, _readyz("leader", fine))])
    try:
        passed = _run_check(url)
    finally:
        server.shutdown()
    assert passed.returncode == 0, passed.stdout
    assert "target kube: reachable (planned in the last pass" in passed.stdout
    assert "target ldap: reachable (applied in the last pass" in passed.stdout
    assert "target slurm: disabled" in passed.stdout
    assert passed.stdout.strip().endswith("helm test: passed")

    down = {
        "ldap": ("error", "cannot connect: LDAPSocketOpenError: ldap.example.org:636"),
        "kube": ("applied", None),
    }
    server, url = _fake_sup([(200, _readyz("leader", down))])
    try:
        failed = _run_check(url)
    finally:
        server.shutdown()
    assert failed.returncode == 1
    assert "FAILED: target ldap not reachable: error: cannot connect: LDAPSocketOpenError" in failed.stdout
    assert "target kube: reachable" in failed.stdout and "helm test: FAILED" in failed.stdout


def test_the_helm_test_check_fails_when_sup_is_not_ready_or_only_standbys_answer() -> None:
    for answers, message in [
        ([(503, _readyz("leader", None, status="not_ready"))], "/readyz says not ready (HTTP 503)"),
        ([(200, _readyz("standby", None))], "no leader with a finished pass answered (last: role standby)"),
        ([(200, _readyz("leader", None))], "no leader with a finished pass answered (last: role leader)"),
    ]:
        server, url = _fake_sup(answers)
        try:
            result = _run_check(url, timeout=3)
        finally:
            server.shutdown()
        assert result.returncode == 1, result.stdout
        assert "FAILED: SUP not ready: " in result.stdout and message in result.stdout, result.stdout
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        nobody = f"http://127.0.0.1:{closed.getsockname()[1]}"
    result = _run_check(nobody, timeout=2)
    assert (
        result.returncode == 1 and f"FAILED: SUP not ready: {nobody}/readyz does not answer" in result.stdout
    )


def test_the_helm_test_check_wants_an_ssh_banner_from_the_gateway() -> None:
    fine = {"ldap": ("applied", None), "kube": ("applied", None)}
    server, url = _fake_sup([(200, _readyz("leader", fine))])
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    banner = b"SSH-2.0-AsyncSSH_2.14.2\r\n"

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.sendall(banner)

    threading.Thread(target=serve, daemon=True).start()
    try:
        answered = _run_check(url, gateway=f"127.0.0.1:{port}")
        banner = b"HTTP/1.1 400 Bad Request\r\n"  # something else listens there
        wrong = _run_check(url, gateway=f"127.0.0.1:{port}", timeout=2)
    finally:
        listener.close()
        closed = _run_check(url, gateway=f"127.0.0.1:{port}", timeout=2)
        server.shutdown()
    assert answered.returncode == 0, answered.stdout
    assert f"gateway 127.0.0.1:{port}: accepts TCP (SSH-2.0-AsyncSSH_2.14.2)" in answered.stdout
    assert (
        wrong.returncode == 1
        and "accepted TCP but sent no SSH banner ('HTTP/1.1 400 Bad Request')" in wrong.stdout
    )
    assert closed.returncode == 1 and f"FAILED: gateway 127.0.0.1:{port} does not accept TCP" in closed.stdout


# --- resources, disruption budgets, anti-affinity, NOTES -----------------------------------------------


MEBI = {"Mi": 1, "Gi": 1024}


def _mebibytes(quantity: str) -> int:
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()  # type: ignore[union-attr]
    return int(number) * MEBI[unit]


def _sizing_rows(text: str) -> dict[str, tuple[int, str, str]]:
    """users -> (peak MiB, request, limit) from a sizing table (docs/sizing.md's or values.yaml's)."""
    rows: dict[str, tuple[int, str, str]] = {}
    pattern = r"^[|#]\s*(\d{1,2},\d{3})\s.*?\(([\d,]+) MiB\).*?(\d+[MG]i)\W+(\d+[MG]i)"
    for match in re.finditer(pattern, text, re.MULTILINE):
        rows[match[1]] = (int(match[2].replace(",", "")), match[3], match[4])
    return rows


def test_the_default_memory_fits_10000_users_as_benchmarks_measured_it() -> None:
    docs = _sizing_rows((REPO / "docs" / "sizing.md").read_text())
    comment = _sizing_rows((CHART / "values.yaml").read_text())
    assert set(docs) == {"1,000", "10,000", "50,000"} and comment == docs
    benchmarks = (REPO / "BENCHMARKS.md").read_text()
    for users, (peak, request, limit) in docs.items():
        assert f"({peak:,} MiB)" in benchmarks, users  # the peak BENCHMARKS.md measured
        assert _mebibytes(request) >= peak * 0.95 and _mebibytes(limit) >= peak * 1.5, users
    _, request, limit = docs["10,000"]
    assert DEFAULTS["resources"]["requests"]["memory"] == request
    assert DEFAULTS["resources"]["limits"]["memory"] == limit


def _budgets(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "PodDisruptionBudget"}


def test_disruption_budgets_keep_all_but_one_replica_of_sup_and_the_gateway(helm_binary: str) -> None:
    objects = render(helm_binary, "sup-system", GATEWAY)
    budgets = _budgets(objects)
    assert set(budgets) == {"sup", "sup-gateway"}
    pods = {
        o["metadata"]["name"]: o["spec"]["template"]["metadata"]["labels"]
        for o in objects
        if o["kind"] in ("Deployment", "Job")
    }
    assert budgets["sup"]["maxUnavailable"] == budgets["sup-gateway"]["maxUnavailable"] == 1
    assert _selects(budgets["sup"]["selector"], pods["sup"])
    assert not _selects(budgets["sup"]["selector"], pods["sup-migrate"])  # a Job's pod breaks a budget
    assert not _selects(budgets["sup"]["selector"], pods["sup-gateway"])
    assert _selects(budgets["sup-gateway"]["selector"], pods["sup-gateway"])
    assert not _selects(budgets["sup-gateway"]["selector"], pods["sup"])
    # one replica: no budget, which would block every drain of its node
    assert set(_budgets(render(helm_binary, "sup-system", GATEWAY, "replicaCount=1"))) == {"sup-gateway"}
    assert (
        _budgets(render(helm_binary, "sup-system", GATEWAY, "replicaCount=1", "gateway.replicaCount=1")) == {}
    )
    assert set(_budgets(render(helm_binary, "sup-system"))) == {"sup"}  # no gateway, no budget of its


def test_the_gateways_replicas_prefer_different_nodes_unless_affinity_is_given(helm_binary: str) -> None:
    def affinity(*settings: str) -> dict[str, Any]:
        objects = render(helm_binary, "sup-system", GATEWAY, *settings)
        (deployment,) = [
            o for o in objects if o["metadata"]["name"] == "sup-gateway" and o["kind"] == "Deployment"
        ]
        found: dict[str, Any] = deployment["spec"]["template"]["spec"]["affinity"]
        return found

    (term,) = affinity()["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "sup-gateway",
        "app.kubernetes.io/instance": "sup",
    }
    assert set(affinity()) == {"podAntiAffinity"}  # preferred only: one node still runs them all
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    given = f"gateway.affinity.nodeAffinity.{required}.nodeSelectorTerms[0].matchExpressions[0].key=edge"
    assert set(affinity(given)) == {"nodeAffinity"}


@pytest.fixture
def release_namespace(kubeapi: KubeApiServer) -> str:
    return kubeapi.new_namespace("sup-system", pod_security="restricted")


def test_notes_give_the_next_step_and_the_researchers_ssh_command(
    helm_binary: str, kubeapi: KubeApiServer, release_namespace: str
) -> None:
    def notes(*settings: str) -> str:
        release = f"sup-{uuid.uuid4().hex[:6]}"
        args = ["install", release, str(CHART), "--namespace", release_namespace, "--dry-run=server"]
        args += ["--kubeconfig", str(kubeapi.admin_kubeconfig)]
        for setting in settings:
            args += ["--set", setting]
        result = helm(helm_binary, *args)
        assert result.returncode == 0, result.stderr
        shown = result.stdout.split("NOTES:", 1)[1]
        assert f"exec deploy/{release} -- sup token create --name ops --role operator" in shown
        assert "docs/install.md" in shown
        assert f"helm test {release} -n {release_namespace} --logs" in shown
        return shown

    assert "ssh -J" not in notes()
    assert "ssh -J USER@GATEWAY USER@login" in notes(GATEWAY)
    public = notes(GATEWAY, "gateway.settings.public_host=login.cluster.example")
    assert "ssh -J USER@login.cluster.example USER@login" in public
    assert "GATEWAY:" not in public


# --- the upgrade from the previous chart version ----------------------------------------------------


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, timeout=60, check=False)


def previous_chart(directory: Path) -> tuple[str, Path]:
    """The chart as it was just before its version became the current one, from the repository's
    history: the parent of the oldest commit of the newest run of commits to Chart.yaml that name
    the current version (later commits to charts/sup are this version's own work)."""
    current = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
    listed = _git("log", "--format=%H", "--", "charts/sup/Chart.yaml")
    if listed.returncode != 0:
        pytest.skip(f"no git history here: {listed.stderr.decode().strip()}")
    bump = None
    for commit in listed.stdout.decode().split():
        shown = _git("show", f"{commit}:charts/sup/Chart.yaml")
        if shown.returncode != 0 or yaml.safe_load(shown.stdout)["version"] != current:
            break
        bump = commit
    parent = _git("rev-parse", "--verify", f"{bump}^") if bump else None
    if parent is None or parent.returncode != 0:
        pytest.skip(f"no chart before version {current} in this clone's history (a shallow clone?)")
    before = parent.stdout.decode().strip()
    shown = _git("show", f"{before}:charts/sup/Chart.yaml")
    if shown.returncode != 0:
        pytest.skip(f"chart {current} is the first: there is no earlier version to upgrade from")
    archive = _git("archive", "--format=tar", before, "charts/sup")
    assert archive.returncode == 0, archive.stderr
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(directory, filter="data")
    return str(yaml.safe_load(shown.stdout)["version"]), directory / "charts" / "sup"


UPGRADE_VALUES: dict[str, list[str]] = {
    "defaults": [],
    "gateway": [
        GATEWAY,
        "gateway.settings.idle_seconds=3600",
        "gateway.settings.public_host=login.example.org",
    ],
    "site": [
        "kube.namespace=research-users",
        "kube.settings.image=registry.example.org/sup-login:0.1.0",
        "kube.settings.ssh_sources[0]=203.0.113.0/24",
        "kube.settings.pvc_retention=30d",
        "kube.settings.group_pods={physics}",
        "replicaCount=1",
    ],
}


@pytest.mark.parametrize("name", list(UPGRADE_VALUES))
def test_an_upgrade_from_the_previous_chart_keeps_the_settings_login_pods_are_made_from(
    helm_binary: str, tmp_path: Path, name: str
) -> None:
    """SUP renders the login pods from its `kube` (and `gateway`: when pods sleep) settings, which
    the chart passes in SUP's ConfigMap: the same values must give the same settings, or `helm
    upgrade` would make SUP restart every login pod. (The real upgrade runs on the node, in
    tests/e2e/test_chart_install.py.)"""
    version, old_chart = previous_chart(tmp_path)

    def settings(chart: Path) -> dict[str, Any]:
        args = ["template", "sup", str(chart), "--namespace", "sup-system"]
        for setting in UPGRADE_VALUES[name]:
            args += ["--set", setting]
        result = helm(helm_binary, *args)
        assert result.returncode == 0, result.stderr
        (config,) = [
            o
            for o in yaml.safe_load_all(result.stdout)
            if o and o["kind"] == "ConfigMap" and o["metadata"]["name"] == "sup"
        ]
        loaded: dict[str, Any] = yaml.safe_load(config["data"]["sup.yaml"])
        return loaded

    before, after = settings(old_chart), settings(CHART)
    assert version != yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
    assert before["kube"] == after["kube"], version
    assert before.get("gateway") == after.get("gateway"), version
    assert ("gateway" in after) == (GATEWAY in UPGRADE_VALUES[name])
