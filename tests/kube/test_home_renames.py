"""A home follows its owner's uid against a real kube-apiserver: a renamed user keeps the same claim
object (same metadata.uid), a claim made by the older naming (home-USERNAME) is adopted rather than
replaced, and a deleted user's claim still follows the retention."""

from __future__ import annotations

import copy
import datetime
from collections.abc import Callable
from typing import Any

from sup.reconcile.planner import run_pass
from sup.store.models import User
from sup.targets.kube.client import KubeClient
from sup.targets.kube.diff import applied_hash
from sup.targets.kube.render import Renderer
from sup.targets.kube.settings import KubeSettings
from tests.kube.plans import user as desired_user
from tests.kube.site import Site


def _object_uid(site: Site, name: str) -> str:
    pvc = site.get("pvc", name)
    assert pvc is not None and not pvc["metadata"].get("deletionTimestamp"), name
    return str(pvc["metadata"]["uid"])


def _mounted(site: Site, workload: str) -> list[str]:
    sts = site.get("workload", workload)
    assert sts is not None, workload
    volumes = sts["spec"]["template"]["spec"]["volumes"]
    return [v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v]


def _kube(site: Site) -> KubeSettings:
    kube = site.settings.kube
    assert kube is not None
    return kube


def _make_the_old_way(site: Site, username: str) -> None:
    """What SUP applied before homes were named by uid: the claim `home-USERNAME` (no uid label),
    and the login StatefulSet, Service and NetworkPolicy mounting it, server-side applied by SUP."""
    kube = _kube(site)
    with site.sessions() as session:
        stored = session.query(User).filter_by(username=username).one()
        uid = stored.uid_number
    renderer = Renderer(kube)
    wanted = desired_user(username, uid)
    legacy = f"home-{username}"
    client = KubeClient(kube)
    try:
        for item in (renderer.home(wanted), *renderer.user_login(wanted)):
            manifest: dict[str, Any] = copy.deepcopy(item.manifest)
            if item.kind == "pvc":
                manifest["metadata"]["name"] = legacy
                manifest["metadata"]["labels"].pop("sup/uid", None)
            if item.kind == "workload":
                (volume,) = [
                    v for v in manifest["spec"]["template"]["spec"]["volumes"] if v["name"] == "home"
                ]
                volume["persistentVolumeClaim"]["claimName"] = legacy
            manifest["metadata"].setdefault("annotations", {})["sup/applied-hash"] = applied_hash(manifest)
            name = manifest["metadata"]["name"]
            client.apply(item.kind, name, manifest, field_manager=kube.field_manager, force=False)
    finally:
        client.close()


def _nothing_retired(changes: list[Any]) -> bool:
    return not [
        c
        for c in changes
        if c.kind == "pvc" and (c.action == "delete" or "orphaned_since" in c.details_json())
    ]


def test_a_renamed_user_keeps_the_same_home_claim(make_site: Callable[..., Site]) -> None:
    site = make_site(pvc_retention="0s")  # a claim taken for an orphan would go at once
    site.add_user("kim")
    site.converge()
    (home,) = site.names("pvc")
    claim = _object_uid(site, home)
    assert run_pass(site.settings, site.sessions, apply=True, opener=site._open).ok  # clears the outbox

    site.update_user("kim", username="kimberly")  # the API's PATCH, SCIM and Keycloak all come here
    # the reconciler's pass after the write: only the users the outbox names (the old and new name)
    scoped = run_pass(site.settings, site.sessions, apply=True, scoped=True, opener=site._open)
    (kube,) = [t for t in scoped.targets if t.target == "kube"]
    assert kube.scoped and kube.state == "applied", kube.error
    assert _nothing_retired(kube.changes)
    assert ("update", "pvc", home) in {(c.action, c.kind, c.name) for c in kube.changes}

    site.converge()  # a full pass after it has nothing to add
    assert site.live_names("pvc") == {home} and _object_uid(site, home) == claim
    assert home == site.home("kimberly") == f"home-u{home.removeprefix('home-u')}"
    assert "login-kim" not in site.live_names("workload")
    assert _mounted(site, "login-kimberly") == [home]
    pvc = site.get("pvc", home)
    assert pvc is not None
    labels, annotations = pvc["metadata"]["labels"], pvc["metadata"].get("annotations", {})
    assert labels["sup/user"] == "kimberly" and labels["sup/uid"] == home.removeprefix("home-u")
    assert annotations["sup/username"] == "kimberly" and "sup/orphaned-since" not in annotations


def test_a_claim_of_the_older_naming_is_adopted_not_replaced(make_site: Callable[..., Site]) -> None:
    site = make_site(pvc_retention="0s")
    site.add_user("kim")
    _make_the_old_way(site, "kim")
    claim = _object_uid(site, "home-kim")

    result = site.converge()
    assert _nothing_retired(result.changes)
    assert ("create", "pvc", site.home("kim")) not in {(c.action, c.kind, c.name) for c in result.changes}
    assert site.live_names("pvc") == {"home-kim"} and _object_uid(site, "home-kim") == claim
    pvc = site.get("pvc", "home-kim")
    assert pvc is not None and pvc["metadata"]["labels"]["sup/uid"] == site.home("kim").removeprefix("home-u")
    assert _mounted(site, "login-kim") == ["home-kim"]

    site.update_user("kim", username="kimberly")  # labelled now: a rename keeps it
    result = site.converge()
    assert _nothing_retired(result.changes)
    assert site.live_names("pvc") == {"home-kim"} and _object_uid(site, "home-kim") == claim
    assert _mounted(site, "login-kimberly") == ["home-kim"]


def test_a_user_renamed_before_their_old_claim_was_labelled_keeps_it(make_site: Callable[..., Site]) -> None:
    """Renamed between the upgrade and SUP's first pass: the old login workload, which runs as the
    user's uid and mounts the claim, says whose it is."""
    site = make_site(pvc_retention="0s")
    site.add_user("kim")
    _make_the_old_way(site, "kim")
    claim = _object_uid(site, "home-kim")
    site.update_user("kim", username="kimberly")

    result = site.converge()
    assert _nothing_retired(result.changes)
    assert site.live_names("pvc") == {"home-kim"} and _object_uid(site, "home-kim") == claim
    assert _mounted(site, "login-kimberly") == ["home-kim"]
    assert "login-kim" not in site.live_names("workload")


def test_a_deleted_users_claim_still_follows_the_retention(make_site: Callable[..., Site]) -> None:
    site = make_site(pvc_retention="1d")
    site.now = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)
    site.add_user("kim")
    site.add_user("saul")
    site.converge()
    kim, saul = site.home("kim"), site.home("saul")
    site.update_user("kim", username="kimberly")
    site.delete_user("saul")

    result = site.converge()
    marked = {c.name for c in result.changes if c.kind == "pvc" and "orphaned_since" in c.details_json()}
    assert marked == {saul}  # the renamed user's claim is not taken for an orphan
    site.now += datetime.timedelta(days=2)
    result = site.converge()
    assert {(c.action, c.kind, c.name) for c in result.changes} == {("delete", "pvc", saul)}
    assert kim in site.live_names("pvc") and saul not in site.live_names("pvc")
