"""The diff: desired state vs an observed namespace -> Changes, without a server (pure)."""

from __future__ import annotations

import copy
import datetime

from sup.targets.kube.diff import plan
from sup.targets.kube.model import Observed, ObservedObject
from sup.targets.kube.render import Renderer
from tests.kube.plans import NOW, applied, brief, diff, group, served, settings, state, user


def test_an_active_user_gets_five_objects_created_claim_policy_and_login_files_first() -> None:
    changes = diff(state(user("kim"), user("gone", 10001, active=False)), Observed())
    assert brief(changes) == [
        ("create", "pvc", "home-u10000"),
        ("create", "network_policy", "login-kim"),
        ("create", "login_config", "login-kim"),
        ("create", "service", "login-kim"),
        ("create", "workload", "login-kim"),
    ]
    assert {c.subject for c in changes} == {"kim"}
    workload = changes[-1].details_json()
    assert (
        workload["image"] == "localhost/sup-login:0.1.0"
        and workload["cpu"] == "4"
        and workload["run_as_user"] == 10000
    )
    assert workload["manifest"]["metadata"]["annotations"]["sup/applied-hash"]


def test_what_the_server_adds_is_not_drift() -> None:
    desired = state(user("kim"))
    observed = applied(diff(desired, Observed()))
    service = observed.objects["service", "login-kim"].body
    service["spec"]["ports"][0]["nodePort"] = 30022  # allocated by the server
    workload = observed.objects["workload", "login-kim"].body
    workload["spec"]["template"]["spec"]["containers"].append({"name": "debug", "image": "busybox"})  # theirs
    workload["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = (
        "4000m"  # normalized
    )
    assert diff(desired, observed) == []


def test_a_changed_field_is_an_update_showing_old_and_new() -> None:
    desired = state(user("kim"))
    observed = applied(diff(desired, Observed()))
    container = observed.objects["workload", "login-kim"].body["spec"]["template"]["spec"]["containers"][0]
    container["image"] = "evil:1"
    container["securityContext"]["allowPrivilegeEscalation"] = True
    (change,) = diff(desired, observed)
    assert brief([change]) == [("update", "workload", "login-kim")]
    path = "spec.template.spec.containers[sshd]"
    assert change.details_json()[f"{path}.image"] == {"old": "evil:1", "new": "localhost/sup-login:0.1.0"}
    assert change.details_json()[f"{path}.securityContext.allowPrivilegeEscalation"] == {
        "old": True,
        "new": False,
    }
    assert change.details_json()["uid"] == "uid-1"


def test_an_ingress_rule_added_by_hand_is_drift() -> None:
    desired = state(user("kim"))
    observed = applied(diff(desired, Observed()))
    spec = observed.objects["network_policy", "login-kim"].body["spec"]
    spec["ingress"] = [{"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]
    (change,) = diff(desired, observed)
    assert change.details_json()["spec.ingress"]["old"] == [{"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]


def test_a_setting_removed_changes_the_hash_and_updates() -> None:
    kube = settings(node_selector={"pool": "login"})
    desired = state(user("kim"))
    observed = applied(diff(desired, Observed(), kube))
    (change,) = diff(desired, observed, settings())
    assert brief([change]) == [("update", "workload", "login-kim")]
    assert "no longer sets" in change.details_json()["reason"]


def test_deactivation_deletes_pod_service_and_policy_and_marks_the_home() -> None:
    observed = applied(diff(state(user("kim")), Observed()))
    changes = diff(state(user("kim", active=False)), observed)
    assert brief(changes) == [
        ("update", "pvc", "home-u10000"),
        ("delete", "workload", "login-kim"),
        ("delete", "service", "login-kim"),
        ("delete", "network_policy", "login-kim"),
        ("delete", "login_config", "login-kim"),
    ]
    assert changes[0].details_json()["orphaned_since"] == {"old": None, "new": "2026-05-01T12:00:00Z"}
    assert all(c.subject == "kim" for c in changes) and all(
        c.details_json()["uid"] == "uid-1" for c in changes
    )


def _orphan(since: str) -> Observed:
    home = applied(diff(state(user("kim")), Observed())).objects["pvc", "home-u10000"]
    body = copy.deepcopy(dict(home.body))
    body["metadata"]["annotations"]["sup/orphaned-since"] = since
    return Observed({("pvc", "home-u10000"): ObservedObject("pvc", body)}, {})


def test_retention_deletes_a_home_only_when_it_has_passed() -> None:
    gone = state()
    assert diff(gone, _orphan("2026-04-01T12:00:00Z"), settings()) == []  # keep
    month = settings(pvc_retention="30d")
    assert diff(gone, _orphan("2026-04-01T12:00:01Z"), month) == []
    (delete,) = diff(gone, _orphan("2026-04-01T12:00:00Z"), month)
    assert brief([delete]) == [("delete", "pvc", "home-u10000")] and delete.subject == "kim"
    (remark,) = diff(gone, _orphan("yesterday"), month)  # unreadable: counted from now, never deleted
    assert remark.details_json()["orphaned_since"] == {"old": "yesterday", "new": "2026-05-01T12:00:00Z"}
    home = applied(diff(state(user("kim")), Observed())).objects["pvc", "home-u10000"]
    (now,) = diff(gone, Observed({("pvc", "home-u10000"): home}, {}), settings(pvc_retention="0s"))
    assert brief([now]) == [("delete", "pvc", "home-u10000")]  # 0s: no mark, at once


def test_a_returning_user_gets_the_home_unmarked() -> None:
    (unmark,) = diff(state(user("kim")), _with_login("kim"))
    assert unmark.details_json()["orphaned_since"] == {"old": "2026-04-01T12:00:00Z", "new": None}


def _with_login(name: str) -> Observed:
    observed = applied(diff(state(user(name)), Observed()))
    objects = dict(observed.objects)
    objects["pvc", "home-u10000"] = _orphan("2026-04-01T12:00:00Z").objects["pvc", "home-u10000"]
    return Observed(objects, {})


def test_a_name_held_by_a_foreign_object_is_reported_and_the_pod_waits() -> None:
    foreign = served(
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "home-u10000"}},
        manager="kubectl",
    )
    changes = diff(state(user("kim")), Observed({}, {("pvc", "home-u10000"): foreign}))
    assert brief(changes) == [
        ("create", "network_policy", "login-kim"),
        ("create", "login_config", "login-kim"),
        ("create", "service", "login-kim"),
        ("report", "pvc", "home-u10000"),
        ("report", "workload", "login-kim"),
    ]
    assert "SUP did not create it" in changes[3].details_json()["error"]
    assert "cannot be written" in changes[4].details_json()["error"]


def test_a_claim_being_deleted_is_reported_and_left_alone() -> None:
    observed = applied(diff(state(user("kim")), Observed()))
    home = observed.objects["pvc", "home-u10000"]
    home.body["metadata"]["deletionTimestamp"] = "2026-05-01T11:00:00Z"
    (report,) = diff(state(user("kim")), observed)
    assert report.action == "report" and "being deleted" in report.details_json()["reason"]
    assert diff(state(), Observed({("pvc", "home-u10000"): home}, {})) == []


def test_claims_never_shrink_and_grow_only_when_bound() -> None:
    observed = applied(diff(state(user("kim")), Observed()))  # 10Gi
    assert diff(state(user("kim")), observed, settings(home_size="5Gi")) == []
    (wait,) = diff(state(user("kim")), observed, settings(home_size="20Gi"))
    assert wait.action == "report" and "once the claim is bound" in wait.details_json()["reason"]
    observed.objects["pvc", "home-u10000"].body["status"]["phase"] = "Bound"
    (grow,) = diff(state(user("kim")), observed, settings(home_size="20Gi"))
    assert grow.details_json()["spec.resources.requests.storage"] == {"old": "10Gi", "new": "20Gi"}


def test_group_pods_for_configured_groups_only() -> None:
    desired = state(user("kim"), user("saul", 10001), groups=(group("physics", 50000, "kim", "saul"),))
    changes = diff(desired, Observed(), settings(group_pods=["physics", "chemistry"]))
    group_changes = [c for c in changes if c.name.startswith("group-") or c.name == "chemistry"]
    assert brief(group_changes) == [
        ("create", "network_policy", "group-physics"),
        ("create", "login_config", "group-physics"),
        ("create", "service", "group-physics"),
        ("create", "workload", "group-physics"),
        ("report", "workload", "chemistry"),
    ]
    assert all(c.subject is None for c in group_changes)


def test_the_plan_is_the_same_for_the_same_input() -> None:
    desired = state(*(user(f"u{i}", 10000 + i) for i in range(20)))
    assert diff(desired, Observed()) == diff(desired, Observed())
    later = NOW + datetime.timedelta(days=1)
    assert diff(desired, Observed(), now=later) == diff(desired, Observed())


def test_a_group_pod_never_mounts_a_claim_that_is_not_sups() -> None:
    desired = state(user("kim"), user("saul", 10001), groups=(group("physics", 50000, "kim", "saul"),))
    theirs = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "home-u10000"}}
    observed = Observed({}, {("pvc", "home-u10000"): served(theirs, manager="kubectl")})
    kube = settings(group_pods=["physics"], home_access_mode="ReadWriteMany")
    changes = diff(desired, observed, kube)
    reports = {(c.kind, c.name): c for c in changes if c.action == "report"}
    assert set(reports) == {("pvc", "home-u10000"), ("workload", "login-kim"), ("workload", "group-physics")}
    assert "PersistentVolumeClaim home-u10000" in reports["workload", "group-physics"].details_json()["error"]
    assert ("create", "workload", "login-saul") in brief(changes)


def test_a_storage_class_set_later_is_reported_not_applied() -> None:
    observed = applied(diff(state(user("kim")), Observed()))  # created with the cluster's default
    changes = diff(state(user("kim")), observed, settings(home_storage_class="fast"))
    (report,) = changes
    assert report.action == "report" and "storageClassName is unset" in report.details_json()["reason"]


def test_a_pass_scoped_to_users_plans_no_group_pod() -> None:
    """A scoped pass read only its users' objects (observe_users): the group pod's were not read, so
    planning it would create what exists; the next full pass covers it."""
    kube = settings(group_pods=["lab"])
    desired = state(user("kim"), groups=(group("lab", 20001, "kim"),))
    full = diff(desired, Observed(), kube)
    assert ("create", "workload", "group-lab") in brief(full)
    mine = {
        key: have for key, have in applied(full).objects.items() if key[1] in ("login-kim", "home-u10000")
    }
    scoped = plan(
        desired, Observed(mine, {}, scoped=True), Renderer(kube), kube, NOW, include_group_pods=False
    )
    assert scoped == []  # kim's objects are as wanted; the group pod is neither created nor deleted


def test_a_login_service_of_type_cluster_ip_is_headless_and_a_node_port_one_is_not() -> None:
    desired = state(user("kim"))
    (headless,) = [c for c in diff(desired, Observed()) if c.kind == "service"]
    spec = headless.details_json()["manifest"]["spec"]
    assert (spec["type"], spec["clusterIP"]) == ("ClusterIP", "None")
    assert "externalTrafficPolicy" not in spec
    (node_port,) = [
        c for c in diff(desired, Observed(), settings(service_type="NodePort")) if c.kind == "service"
    ]
    spec = node_port.details_json()["manifest"]["spec"]
    assert "clusterIP" not in spec and spec["externalTrafficPolicy"] == "Local"


def _with_cluster_ip(observed: Observed, name: str, address: str | None) -> None:
    spec = observed.objects["service", name].body["spec"]
    if address is None:
        spec.pop("clusterIP")
    else:
        spec["clusterIP"] = address


def test_a_service_with_a_cluster_ip_from_before_is_recreated_headless_once() -> None:
    """An upgraded site: the login Service SUP made before has a ClusterIP, which cannot change in
    place. The plan deletes and creates it again (one update with `recreate`), and once it is
    headless there is nothing left to do."""
    desired = state(user("kim"))
    observed = applied(diff(desired, Observed()))
    _with_cluster_ip(observed, "login-kim", "10.96.4.2")
    (change,) = diff(desired, observed)
    assert brief([change]) == [("update", "service", "login-kim")]
    shown = change.details_json()
    assert shown["spec.clusterIP"] == {"old": "10.96.4.2", "new": "None"}
    assert "recreate" in shown and "cannot change once set" in shown["reason"]
    assert shown["uid"] == "uid-1"  # the one deleted is the one observed
    _with_cluster_ip(observed, "login-kim", "None")
    assert diff(desired, observed) == []


def test_a_headless_service_becoming_a_node_port_is_recreated() -> None:
    desired = state(user("kim"))
    observed = applied(diff(desired, Observed()))
    (change,) = diff(desired, observed, settings(service_type="NodePort"))
    assert brief([change]) == [("update", "service", "login-kim")]
    assert "recreate" in change.details_json()


def test_a_node_port_service_that_stays_one_is_updated_in_place() -> None:
    kube = settings(service_type="NodePort")
    desired = state(user("kim"))
    observed = applied(diff(desired, Observed(), kube))
    (change,) = diff(desired, observed, settings(service_type="NodePort", service_port=2022))
    assert brief([change]) == [("update", "service", "login-kim")]
    assert "recreate" not in change.details_json()
