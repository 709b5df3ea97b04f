"""Login Services against a real kube-apiserver: headless (no ClusterIP allocated per person, so the
first pass at 50,000 people does not wait on the ClusterIP allocator), and a site upgraded from
Services with a ClusterIP has each replaced once, after which a pass writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.kube.site import Site

# service.yaml.j2 as SUP shipped it before (a ClusterIP allocated per person)
OLD_SERVICE = Path(__file__).parent / "fixtures" / "service-with-cluster-ip.yaml.j2"


def _service(site: Site, name: str) -> dict[str, Any]:
    service = site.get("service", name)
    assert service is not None, f"no Service {name}"
    return service


def test_a_login_service_is_headless_and_gets_no_cluster_ip(site: Site) -> None:
    site.add_user("kim")
    site.add_group("physics", members=["kim"])
    site.with_kube(group_pods=["physics"])
    site.converge()
    for name in ("login-kim", "group-physics"):
        spec = _service(site, name)["spec"]
        assert (spec["type"], spec["clusterIP"], spec["clusterIPs"]) == ("ClusterIP", "None", ["None"])
        assert spec["ports"][0]["targetPort"] == 2222  # where the name's address (the pod's) answers


def test_a_node_port_login_service_keeps_its_cluster_ip(make_site: Callable[..., Site]) -> None:
    site = make_site(service_type="NodePort")
    site.add_user("kim")
    site.converge()
    spec = _service(site, "login-kim")["spec"]
    assert spec["type"] == "NodePort" and spec["clusterIP"] not in (None, "None")


def test_services_with_a_cluster_ip_from_before_are_replaced_once_then_nothing_is_written(
    make_site: Callable[..., Site], tmp_path: Path
) -> None:
    old = tmp_path / "templates"
    old.mkdir()
    (old / "service.yaml.j2").write_text(OLD_SERVICE.read_text())
    site = make_site(templates_dir=str(old))
    for name in ("kim", "lee"):
        site.add_user(name)
    site.converge()  # SUP before the upgrade
    before = {name: _service(site, name) for name in ("login-kim", "login-lee")}
    for service in before.values():
        assert service["spec"]["clusterIP"] not in (None, "None")  # allocated

    site.with_kube(templates_dir=None)  # the upgrade: the shipped templates
    upgrade = site.reconcile()
    assert upgrade.ok, [(t.error, t.failed) for t in upgrade.targets]
    assert sorted((c.action, c.kind, c.name) for c in upgrade.changes) == [
        ("update", "service", "login-kim"),
        ("update", "service", "login-lee"),
    ]
    assert all("recreate" in c.as_json()["details"] for c in upgrade.changes)
    for name, old_service in before.items():
        now = _service(site, name)
        assert now["metadata"]["uid"] != old_service["metadata"]["uid"]  # replaced, not patched
        assert now["spec"]["clusterIP"] == "None"
        assert now["spec"]["selector"] == old_service["spec"]["selector"]  # the same pod behind it

    versions = site.versions()
    again = site.reconcile()
    assert again.changes == [], [c.as_json() for c in again.changes]
    assert site.last_writes == 0 and site.versions() == versions
    assert site.statuses() == {"kim": ("in_sync", None), "lee": ("in_sync", None)}
