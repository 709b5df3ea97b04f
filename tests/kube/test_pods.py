"""Login pods stuck on an outdated template are replaced; nothing else is (pure, with pod statuses as
the kubelet reports them: tests/kube/fixtures/pod-*.json)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, cast

import pytest

from sup.targets.kube.model import Observed, ObservedObject
from sup.targets.kube.pods import rollout_stuck, stuck_reason
from tests.kube.plans import applied, brief, diff, settings, state, user

FIXTURES = Path(__file__).parent / "fixtures"
OLD, NEW = "login-kim-5d8f7c9b64", "login-kim-7b9c6d5f48"


def _pod(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((FIXTURES / f"pod-{name}.json").read_text())
    return body


def _stuck_rollout(observed: Observed, workload: str = "login-kim") -> None:
    """What the StatefulSet controller reports when a new template cannot reach a pod that is not
    ready: it has seen the template (observedGeneration), the update revision is new, none ready."""
    body = cast(dict[str, Any], observed.objects["workload", workload].body)
    body["metadata"]["generation"] = 2
    body["status"] = {
        "availableReplicas": 0,
        "collisionCount": 0,
        "currentReplicas": 1,
        "currentRevision": OLD,
        "observedGeneration": 2,
        "replicas": 1,
        "updateRevision": NEW,
        "updatedReplicas": 0,
    }


def _namespace(*pods: dict[str, Any]) -> Observed:
    observed = applied(diff(state(user("kim")), Observed()))
    _stuck_rollout(observed)
    found = {p["metadata"]["name"]: ObservedObject("pod", p) for p in pods}
    return Observed(observed.objects, {}, pods=found)


def test_a_pod_crash_looping_on_an_outdated_template_is_replaced() -> None:
    observed = _namespace(_pod("crashloop"))
    assert rollout_stuck(observed.objects["workload", "login-kim"])
    changes = diff(state(user("kim")), observed)
    assert brief(changes) == [("update", "pod", "login-kim-0")]
    (change,) = changes
    shown = change.details_json()
    assert change.subject == "kim" and shown["waiting"] == "CrashLoopBackOff"
    assert shown["revision"] == {"old": OLD, "new": NEW}
    assert shown["uid"] == "0b6a8e0e-3c43-4f57-9a4b-6f2f4d1c2e11"  # the pod's: deleted only if still it
    assert "back-off 1m20s" in shown["reason"] and "home are kept" in shown["reason"]


def test_a_pod_that_cannot_pull_its_image_is_replaced_too() -> None:
    pod = ObservedObject("pod", _pod("imagepullbackoff"))
    assert stuck_reason(pod) is not None and stuck_reason(pod)[0] == "ImagePullBackOff"  # type: ignore[index]
    assert brief(diff(state(user("kim")), _namespace(_pod("imagepullbackoff")))) == [
        ("update", "pod", "login-kim-0")
    ]


def _changed(pod: dict[str, Any], **where: Any) -> dict[str, Any]:
    body = copy.deepcopy(pod)
    for path, value in where.items():
        *parents, last = path.split("__")
        node = body
        for part in parents:
            node = node[part]
        node[last] = value
    return body


@pytest.mark.parametrize(
    "case",
    [
        "healthy",
        "on the current template",
        "not controlled by SUP's StatefulSet (uid)",
        "controlled by something else",
        "without SUP's labels",
        "already being deleted",
    ],
)
def test_other_pods_are_never_touched(case: str) -> None:
    crash = _pod("crashloop")
    pod = {
        "healthy": _pod("running"),
        "on the current template": _changed(
            crash, metadata__labels={**crash["metadata"]["labels"], "controller-revision-hash": NEW}
        ),
        "not controlled by SUP's StatefulSet (uid)": _changed(
            crash, metadata__ownerReferences=[{**crash["metadata"]["ownerReferences"][0], "uid": "other"}]
        ),
        "controlled by something else": _changed(crash, metadata__ownerReferences=[]),
        "without SUP's labels": _changed(crash, metadata__labels={"app": "login"}),
        "already being deleted": _changed(crash, metadata__deletionTimestamp="2026-11-23T10:05:00Z"),
    }[case]
    assert diff(state(user("kim")), _namespace(pod)) == []


def test_nothing_is_replaced_while_the_controller_has_not_seen_the_template_or_sup_changes_it() -> None:
    observed = _namespace(_pod("crashloop"))
    observed.objects["workload", "login-kim"].body["metadata"]["generation"] = 3  # not observed yet
    assert not rollout_stuck(observed.objects["workload", "login-kim"])
    assert diff(state(user("kim")), observed) == []
    observed = _namespace(_pod("crashloop"))
    changes = diff(state(user("kim")), observed, settings(image="fixed:2"))  # the fix is in this plan
    assert brief(changes) == [("update", "workload", "login-kim")]


def test_a_pod_of_a_user_no_longer_active_goes_with_its_statefulset_not_as_a_replacement() -> None:
    changes = diff(state(user("kim", active=False)), _namespace(_pod("crashloop")))
    assert ("update", "pod", "login-kim-0") not in brief(changes)
    assert ("delete", "workload", "login-kim") in brief(changes)


def test_a_ready_rollout_is_not_stuck() -> None:
    observed = _namespace()
    workload = observed.objects["workload", "login-kim"]
    workload.body["status"]["readyReplicas"] = 1
    assert not rollout_stuck(workload)
    cast(dict[str, Any], workload.body)["status"] = {
        "observedGeneration": 2,
        "currentRevision": NEW,
        "updateRevision": NEW,
    }
    assert not rollout_stuck(workload)
