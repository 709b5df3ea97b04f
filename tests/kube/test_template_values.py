"""The templates' interface (template_values.py) is pinned: the shipped templates render a fixed site
to the committed manifests, and an operator's template reads every variable under the names, and
with the JSON, it always had (pure).

The fixtures were rendered by the code before the values were typed. After an intended change to a
shipped template, rewrite them with `.venv/bin/python -m tests.kube.test_template_values` and review
the diff: every line of it is a change to what SUP applies.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from sup.targets.kube.render import Renderer
from tests.kube.plans import group, settings, user

FIXTURES = Path(__file__).parent / "fixtures"
RENDERED = FIXTURES / "rendered-site.json"
VARIABLES = FIXTURES / "template-variables.json"

# Slurm, shared homes, every CIDR setting with srun's ports, a group pod with its host key, requests
_SITE: dict[str, Any] = {
    "home_mode": "shared", "shared_home_claim": "homes", "group_pods": ["lab"],
    "group_host_key_secret": "host-keys", "slurm_config_map": "slurm-conf", "munge_key_secret": "munge-key",
    "ssh_sources": ["203.0.113.0/24", "0.0.0.0/0"], "dns_cidrs": ["10.96.0.10/32"],
    "ldap_cidrs": ["10.1.0.0/24"], "slurmctld_cidrs": ["10.2.0.1/32"], "slurmd_cidrs": ["10.3.0.0/16"],
    "srun_port_range": "60001-63000", "egress_cidrs": ["0.0.0.0/0"], "cluster_cidrs": ["10.0.0.0/8"],
    "cpu_request": "1", "node_selector": {"pool": "login"}, "image_pull_secrets": ["registry"],
    "service_type": "NodePort", "ssh_tcp_forwarding": "no",
}  # fmt: skip

# An operator's Service template that puts what it reads into annotations, as JSON.
_READS_EVERYTHING = """apiVersion: v1
kind: Service
metadata:
  name: {{ names.login | tojson }}
  annotations:
    settings: {{ settings | tojson | tojson }}
    network: {{ network | tojson | tojson }}
    names: {{ names | tojson | tojson }}
    owner: {{ owner | tojson | tojson }}
    pod_labels: {{ pod_labels | tojson | tojson }}
    idle_port: {{ idle_port | tojson | tojson }}
{%- if user is defined %}
    user: {{ user | tojson | tojson }}
    home: {{ (user.home_directory ~ " " ~ user["username"] ~ " " ~ user.supplemental_gids[0]) | tojson }}
{%- else %}
    group: {{ group | tojson | tojson }}
    members: {{ members | tojson | tojson }}
    shared_claim: {{ shared_claim | tojson | tojson }}
    claims: {{ members | map(attribute="claim") | join(",") | tojson }}
{%- endif %}
    read: {{ (settings.cpu_request ~ " " ~ settings["memory_request"] ~ " " ~ settings.ldap_ports[0]
              ~ " " ~ network.srun_ports.end_port ~ " " ~ network["egress"][0]["except"] | join(","))
             | tojson }}
spec:
  selector: {{ pod_labels | tojson }}
  ports: [{name: ssh, port: 22, targetPort: {{ settings.ssh_port }}}]
"""


def _rendered_site() -> list[dict[str, Any]]:
    renderer = Renderer(settings(**_SITE))
    kim, saul = user("kim", 10000), replace(user("saul", 10001), home_directory="/home/saul")
    lab = group("lab", 20001, "kim", "saul")
    found = [w.manifest for w in renderer.user_login(kim, groups=(20001,), idle_port=9101)]
    found += [w.manifest for w in renderer.group_login(lab, [kim, saul], asleep=True, idle_port=9101)]
    claims = Renderer(settings(home_access_mode="ReadWriteMany", group_pods=["lab"], **_slurm()))
    found += [claims.home(kim, "home-kim").manifest]
    found += [w.manifest for w in claims.group_login(lab, [kim, saul], {10000: "home-kim"})]
    return found


def _slurm() -> dict[str, Any]:
    return {"slurm_config_map": "slurm-conf", "munge_key_secret": "munge-key", "memory_request": "1Gi"}


def _variables(templates: Path) -> list[dict[str, Any]]:
    (templates / "service.yaml.j2").write_text(_READS_EVERYTHING)
    renderer = Renderer(settings(**_SITE, templates_dir=str(templates)))
    kim, saul = user("kim", 10000), user("saul", 10001)
    lab = group("lab", 20001, "kim", "saul")
    services = [w for w in renderer.user_login(kim, groups=(20001,), idle_port=9101) if w.kind == "service"]
    services += [w for w in renderer.group_login(lab, [kim, saul]) if w.kind == "service"]
    annotations = [dict(s.manifest["metadata"]["annotations"]) for s in services]
    for found in annotations:
        found["settings"] = {**json.loads(found["settings"]), "templates_dir": "(the operator's)"}
    return annotations


def test_the_shipped_templates_render_the_site_as_pinned() -> None:
    assert _rendered_site() == json.loads(RENDERED.read_text())


def test_an_operator_template_reads_every_variable_by_its_name_with_its_json(tmp_path: Path) -> None:
    assert _variables(tmp_path) == json.loads(VARIABLES.read_text())


def test_the_fingerprint_follows_the_settings() -> None:
    """The memo (memo.py) trusts a rendered object while the fingerprint stays: any setting changes it."""
    assert Renderer(settings()).fingerprint == Renderer(settings()).fingerprint
    assert Renderer(settings()).fingerprint != Renderer(settings(cpu="2")).fingerprint
    assert Renderer(settings()).fingerprint != Renderer(settings(watch=False)).fingerprint


if __name__ == "__main__":  # rewrite the fixtures (see the module's docstring)
    import tempfile

    RENDERED.write_text(json.dumps(_rendered_site(), indent=1, sort_keys=True) + "\n")
    with tempfile.TemporaryDirectory() as work:
        VARIABLES.write_text(json.dumps(_variables(Path(work)), indent=1, sort_keys=True) + "\n")
