"""The shared home mode (kube.home_mode: shared), without a server (pure): a login pod mounts only its
person's directory of the site's shared claim at their home, no claim is made per person, claims of
the claim mode are never retired, and a home with no place in the shared volume gets no pod. The
last test runs on the session's kube-apiserver (no nodes: tests/e2e/test_login_pods.py logs in)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sup.targets.kube.model import Observed, ObservedObject
from sup.targets.kube.render import Renderer, TemplateError, shipped_templates
from tests.kube.plans import applied, brief, diff, group, settings, state, user
from tests.kube.site import Site

SHARED = {"home_mode": "shared", "shared_home_claim": "cluster-homes", "home_root": "/home"}


def _site_claim() -> Observed:
    """The namespace holding only the site's shared claim (made by the site, not SUP)."""
    claim = ObservedObject("pvc", {"metadata": {"name": "cluster-homes", "uid": "site-1"}})
    return Observed({}, {("pvc", "cluster-homes"): claim})


def _with(observed: Observed, more: Observed) -> Observed:
    return Observed({**observed.objects, **more.objects}, {**observed.foreign, **more.foreign})


def _pod(changes: list[Any], workload: str) -> dict[str, Any]:
    (change,) = [c for c in changes if c.kind == "workload" and c.name == workload and c.action != "report"]
    pod: dict[str, Any] = change.details_json()["manifest"]["spec"]["template"]["spec"]
    return pod


def test_a_login_pod_mounts_only_its_persons_directory_at_their_home() -> None:
    changes = diff(state(user("kim"), user("lee", 10001)), _site_claim(), settings(**SHARED))
    assert not [c for c in changes if c.kind == "pvc"]  # no claim of anyone's own
    assert all(c.action == "create" for c in changes)
    pod = _pod(changes, "login-kim")
    assert {v["name"]: v for v in pod["volumes"]}["home"] == {
        "name": "home", "persistentVolumeClaim": {"claimName": "cluster-homes"},
    }  # fmt: skip
    mounts = pod["containers"][0]["volumeMounts"]
    assert [m for m in mounts if m["name"] == "home"] == [
        {"name": "home", "mountPath": "/home/kim", "subPath": "kim"}
    ]
    # the kubelet would re-own the whole shared volume (everyone's homes) to an fsGroup
    assert "fsGroup" not in pod["securityContext"] and "fsGroupChangePolicy" not in pod["securityContext"]
    assert pod["securityContext"]["runAsUser"] == 10000
    (lee,) = [m for m in _pod(changes, "login-lee")["containers"][0]["volumeMounts"] if m["name"] == "home"]
    assert lee["subPath"] == "lee"


def test_a_home_deeper_below_the_root_is_its_path_in_the_volume() -> None:
    kim = replace(user("kim"), home_directory="/shared/home/k/kim")
    kube = settings(**{**SHARED, "home_root": "/shared/home"})
    pod = _pod(diff(state(kim), _site_claim(), kube), "login-kim")
    (home,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "home"]
    assert home == {"name": "home", "mountPath": "/shared/home/k/kim", "subPath": "k/kim"}


def test_a_home_outside_the_root_gets_no_pod_and_an_existing_one_is_left_alone() -> None:
    kube = settings(**SHARED)
    made = applied(diff(state(user("kim"), user("lee", 10001)), _site_claim(), kube))
    outside = replace(user("kim"), home_directory="/srv/kim")
    changes = diff(state(outside, user("lee", 10001)), _with(made, _site_claim()), kube)
    (report,) = changes  # nothing written, nothing deleted: a wrong home_root must not cut sessions
    assert (report.action, report.kind, report.name, report.subject) == (
        "report",
        "workload",
        "login-kim",
        "kim",
    )
    error = report.details_json()["error"]
    assert "/srv/kim" in error and "below the home root /home (kube.home_root)" in error
    assert "no login pod" in error
    # and someone new with such a home gets nothing at all
    new = diff(state(replace(user("max", 10002), home_directory="/home")), _site_claim(), kube)
    assert brief(new) == [("report", "workload", "login-max")]


def test_without_the_sites_claim_no_login_pod_is_created() -> None:
    changes = diff(state(user("kim")), Observed(), settings(**SHARED))
    reports = {(c.kind, c.name): c.details_json()["error"] for c in changes if c.action == "report"}
    assert (
        "kube.shared_home_claim cluster-homes is not a PersistentVolumeClaim"
        in reports["pvc", "cluster-homes"]
    )
    assert "PersistentVolumeClaim cluster-homes is missing" in reports["workload", "login-kim"]
    assert not [c for c in changes if c.action == "create" and c.kind == "workload"]
    # a scoped read does not list claims: it cannot tell, and does not hold pods back
    scoped = diff(state(user("kim")), Observed(scoped=True), settings(**SHARED))
    assert ("create", "workload", "login-kim") in brief(scoped)


def test_claims_of_the_claim_mode_are_kept_and_never_retired() -> None:
    claim_mode = applied(diff(state(user("kim"), user("old", 10001)), Observed(), settings()))
    assert {name for kind, name in claim_mode.objects if kind == "pvc"} == {"home-u10000", "home-u10001"}
    # old leaves; the site switches to the shared mode with a retention that would delete at once
    kube = settings(**SHARED, pvc_retention="0s")
    changes = diff(
        state(user("kim"), user("old", 10001, active=False)), _with(claim_mode, _site_claim()), kube
    )
    assert not [c for c in changes if c.kind == "pvc" and c.action != "report"]
    (kept,) = [c for c in changes if c.kind == "pvc"]
    assert (kept.name, kept.subject) == ("home-u10000", "kim")
    assert "SUP keeps it and its files" in kept.details_json()["reason"]
    (update,) = [c for c in changes if c.action == "update"]  # kim's pod now mounts the shared claim
    assert (update.kind, update.name) == ("workload", "login-kim")
    assert ("delete", "workload", "login-old") in brief(changes)


def test_a_group_pod_mounts_each_members_directory_and_follows_membership() -> None:
    kube = settings(**SHARED, group_pods=["lab"])
    people = (user("kim"), user("lee", 10001), replace(user("max", 10002), home_directory="/opt/max"))
    lab = group("lab", 20000, "kim", "lee", "max")
    changes = diff(state(*people, groups=(lab,)), _site_claim(), kube)
    pod = _pod(changes, "group-lab")
    assert [v for v in pod["volumes"] if "persistentVolumeClaim" in v] == [
        {"name": "homes", "persistentVolumeClaim": {"claimName": "cluster-homes"}}
    ]
    homes = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "homes"]
    assert homes == [
        {"name": "homes", "mountPath": "/home/kim", "subPath": "kim"},
        {"name": "homes", "mountPath": "/home/lee", "subPath": "lee"},
    ]  # max's home is outside the root: not mounted, and said so
    (refused,) = [c for c in changes if c.subject == "max" and c.action == "report" and c.name != "login-max"]
    assert "not mounted in the login pod group-lab" in refused.details_json()["error"]
    # a member leaving changes the pod template (its pod restarts without their home)
    fewer = diff(
        state(*people, groups=(group("lab", 20000, "kim"),)), _with(applied(changes), _site_claim()), kube
    )
    (update,) = [c for c in fewer if c.action == "update" and c.name == "group-lab" and c.kind == "workload"]
    assert update.subject is None
    after = update.details_json()["manifest"]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert [m["subPath"] for m in after if m["name"] == "homes"] == ["kim"]


@pytest.mark.parametrize(
    ("mount", "message"),
    [
        ('{"name": "home", "mountPath": "/home"}', "with subPath (none)"),
        ('{"name": "home", "mountPath": "/x", "subPath": "lee"}', "with subPath lee"),
        ('{"name": "home", "mountPath": "/x", "subPathExpr": "$(X)"}', "with subPath $(X)"),
    ],
)
def test_an_operator_template_cannot_mount_more_of_the_shared_claim(
    tmp_path: Path, mount: str, message: str
) -> None:
    shipped = (shipped_templates() / "user-statefulset.yaml.j2").read_text()
    marker = '{"name": "login", "mountPath": "/etc/sup/login", "readOnly": true}'
    assert marker in shipped
    (tmp_path / "user-statefulset.yaml.j2").write_text(shipped.replace(marker, f"{mount}, {marker}"))
    renderer = Renderer(settings(**SHARED, templates_dir=str(tmp_path)))
    with pytest.raises(TemplateError, match=r"user-statefulset\.yaml\.j2 mounts claim cluster-homes") as info:
        renderer.user_login(user("kim"))
    assert message in str(info.value)


def test_an_operator_template_with_an_fs_group_is_refused_in_the_shared_mode(tmp_path: Path) -> None:
    shipped = (shipped_templates() / "user-statefulset.yaml.j2").read_text()
    marker = '"supplementalGroups":'
    (tmp_path / "user-statefulset.yaml.j2").write_text(shipped.replace(marker, '"fsGroup": 1, ' + marker))
    with pytest.raises(TemplateError, match="sets fsGroup"):
        Renderer(settings(**SHARED, templates_dir=str(tmp_path))).user_login(user("kim"))
    # the claim mode renders the same template (its own claim: fsGroup makes it the user's)
    Renderer(settings(templates_dir=str(tmp_path))).user_login(user("kim"))


# --- on a real API server --------------------------------------------------------------------------


def test_switching_to_the_shared_mode_keeps_every_claim_and_settles(make_site: Callable[..., Site]) -> None:
    """A claim made in the claim mode survives passes in the shared mode, even with a retention that
    would delete an orphan at once, and the pass after the switch writes nothing."""
    site = make_site(pvc_retention="0s")
    site.add_user("kim")
    site.add_user("old")
    site.converge()
    claims = {site.home("kim"), site.home("old")}
    assert claims <= site.names("pvc")
    with site.admin() as admin:  # the site's ReadWriteMany claim of the home root
        admin.create(
            site.path("pvc"),
            {
                "metadata": {"name": "cluster-homes"},
                "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Ti"}}},
            },
        )
    site.delete_user("old")
    site.with_kube(**SHARED)
    result = site.reconcile()
    assert result.ok
    assert claims | {"cluster-homes"} == site.live_names("pvc")
    sts = site.get("workload", "login-kim")
    assert sts is not None
    pod = sts["spec"]["template"]["spec"]
    assert {"name": "home", "persistentVolumeClaim": {"claimName": "cluster-homes"}} in pod["volumes"]
    assert "fsGroup" not in pod["securityContext"]
    before = site.versions()
    again = site.reconcile()
    assert again.ok and site.last_writes == 0 and site.versions() == before
    (kept,) = again.changes  # only the reminder that kim's claim still holds her files
    assert (kept.action, kept.kind, kept.name) == ("report", "pvc", site.home("kim"))
    for claim in claims:
        body = site.get("pvc", claim)
        assert body is not None and "sup/orphaned-since" not in body["metadata"].get("annotations", {})


def test_without_an_fs_group_the_munge_sidecar_alone_can_read_its_key() -> None:
    """The user's pod has no fsGroup to read the Secret by: its key file is readable in the sidecar
    (the only container that mounts it; sup-munged copies it 0400 for munged)."""
    slurm = {"slurm_config_map": "slurm-conf", "munge_key_secret": "munge-key"}
    for kube, mode in ((settings(**slurm), 0o400), (settings(**SHARED, **slurm), 0o444)):
        (workload,) = [w for w in Renderer(kube).user_login(user("kim")) if w.kind == "workload"]
        pod = workload.manifest["spec"]["template"]["spec"]
        (key,) = [v for v in pod["volumes"] if v["name"] == "munge-key"]
        assert key["secret"]["defaultMode"] == mode
        mounting = [
            c["name"] for c in pod["containers"] if any(m["name"] == "munge-key" for m in c["volumeMounts"])
        ]
        assert mounting == ["munge"]
