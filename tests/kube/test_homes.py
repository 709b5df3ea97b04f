"""Home claims follow the uid, not the name (homes.py), without a server (pure): a rename keeps the
claim, claims of the older naming (home-KEY) are adopted, and a claim whose uid is active is never
retired."""

from __future__ import annotations

import copy
from typing import Any

from sup.targets.kube.diff import applied_hash
from sup.targets.kube.model import Observed, ObservedObject
from sup.targets.kube.names import home_claim
from tests.kube.plans import applied, brief, diff, served, settings, state, user


def _legacy(username: str, uid: int = 10000) -> Observed:
    """The namespace as SUP made it before homes were named by uid: the claim `home-KEY`, without the
    uid label, mounted by the login workload under that name."""
    objects: dict[tuple[str, str], ObservedObject] = {}
    for change in diff(state(user(username, uid)), Observed()):
        manifest: dict[str, Any] = copy.deepcopy(change.details_json()["manifest"])
        if change.kind == "pvc":
            manifest["metadata"]["name"] = f"home-{username}"
            del manifest["metadata"]["labels"]["sup/uid"]
        if change.kind == "workload":
            (volume,) = [v for v in manifest["spec"]["template"]["spec"]["volumes"] if v["name"] == "home"]
            volume["persistentVolumeClaim"]["claimName"] = f"home-{username}"
        manifest["metadata"]["annotations"]["sup/applied-hash"] = applied_hash(manifest)
        objects[change.kind, manifest["metadata"]["name"]] = served(manifest)
    return Observed(objects, {})


def _mounts(changes: list[Any], workload: str) -> list[str]:
    (change,) = [c for c in changes if c.kind == "workload" and c.name == workload]
    volumes = change.details_json()["manifest"]["spec"]["template"]["spec"]["volumes"]
    return [v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v]


def test_the_home_claim_is_named_and_labelled_by_the_uid() -> None:
    assert home_claim(10001) == "home-u10001"
    changes = diff(state(user("kim", 10001)), Observed())
    (claim,) = [c for c in changes if c.kind == "pvc"]
    labels = claim.details_json()["manifest"]["metadata"]["labels"]
    assert claim.name == "home-u10001" and labels["sup/uid"] == "10001" and labels["sup/user"] == "kim"
    assert _mounts(changes, "login-kim") == ["home-u10001"]


def test_a_renamed_user_keeps_the_claim_and_nothing_is_retired() -> None:
    observed = applied(diff(state(user("kim")), Observed()))
    changes = diff(state(user("kimberly")), observed, settings(pvc_retention="0s"))
    assert brief(changes) == [
        ("create", "network_policy", "login-kimberly"),
        ("create", "login_config", "login-kimberly"),
        ("create", "service", "login-kimberly"),
        ("create", "workload", "login-kimberly"),
        ("update", "pvc", "home-u10000"),  # its username label and annotation
        ("delete", "workload", "login-kim"),
        ("delete", "service", "login-kim"),
        ("delete", "network_policy", "login-kim"),
        ("delete", "login_config", "login-kim"),
    ]
    (update,) = [c for c in changes if c.kind == "pvc"]
    assert update.details_json()["metadata.labels.sup/user"] == {"old": "kim", "new": "kimberly"}
    assert "orphaned_since" not in update.details_json()
    assert _mounts(changes, "login-kimberly") == ["home-u10000"]


def test_a_claim_of_the_older_naming_is_adopted_not_replaced() -> None:
    observed = _legacy("kim")
    changes = diff(state(user("kim")), observed, settings(pvc_retention="0s"))
    (label,) = changes  # no new claim: the old one gets the uid label, the pod keeps mounting it
    assert brief([label]) == [("update", "pvc", "home-kim")]
    assert label.details_json()["metadata.labels.sup/uid"] == {"old": None, "new": "10000"}
    assert label.details_json()["uid"] == "uid-1"


def test_a_user_renamed_before_the_claim_was_labelled_keeps_it() -> None:
    """The old login workload says whose the claim is: it runs as the uid and mounts it."""
    observed = _legacy("kim")
    changes = diff(state(user("kimberly")), observed)
    assert ("create", "pvc", "home-u10000") not in brief(changes)
    assert ("update", "pvc", "home-kim") in brief(changes)
    assert _mounts(changes, "login-kimberly") == ["home-kim"]
    assert not [c for c in changes if c.kind == "pvc" and "orphaned_since" in c.details_json()]


def test_a_second_claim_of_an_active_uid_is_never_retired() -> None:
    observed = applied(diff(state(user("kim")), Observed()))
    body = copy.deepcopy(dict(observed.objects["pvc", "home-u10000"].body))
    body["metadata"]["name"] = "home-kim"
    extra = served({"apiVersion": "v1", "kind": "PersistentVolumeClaim", **body}, uid="uid-2")
    objects = {**observed.objects, ("pvc", "home-kim"): extra}
    (report,) = diff(state(user("kim")), Observed(objects, {}), settings(pvc_retention="0s"))
    assert (
        brief([report]) == [("report", "pvc", "home-kim")]
        and "keeps this one" in report.details_json()["reason"]
    )


def test_a_deleted_users_claim_follows_the_retention() -> None:
    observed = applied(diff(state(user("kim")), Observed()))
    home = {("pvc", "home-u10000"): observed.objects["pvc", "home-u10000"]}
    (mark,) = diff(state(), Observed(home, {}))
    assert (
        brief([mark]) == [("update", "pvc", "home-u10000")] and mark.details_json()["orphaned_since"]["new"]
    )
    (delete,) = diff(state(), Observed(home, {}), settings(pvc_retention="0s"))
    assert brief([delete]) == [("delete", "pvc", "home-u10000")] and delete.subject == "kim"


def test_a_scoped_read_leaves_a_claim_whose_owner_it_did_not_read() -> None:
    """A claim of a uid no user of the pass has may belong to a user outside the scope."""
    observed = applied(diff(state(user("kim")), Observed()))
    home = {("pvc", "home-u10000"): observed.objects["pvc", "home-u10000"]}
    kube = settings(pvc_retention="0s")
    saul = state(user("saul", 10001))
    assert diff(saul, Observed(home, {}, scoped=True), kube) == diff(saul, Observed(), kube)
    inactive = state(user("kim", active=False))  # read, and known inactive: retired as ever
    (mark,) = diff(inactive, Observed(home, {}, scoped=True))
    assert mark.details_json()["orphaned_since"]["new"]
