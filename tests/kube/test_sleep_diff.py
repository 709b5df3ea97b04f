"""A login pod asleep (docs/ssh-gateway.md, "Scale to zero") in the diff, without a server (pure): its
StatefulSet gets replicas 0 and nothing else changes; waking is the same change back."""

from __future__ import annotations

from dataclasses import replace

from sup.domain.login_pods import Route
from sup.targets.kube.model import KubeChange, ObjectUpdate, Observed
from tests.kube.plans import applied, brief, diff, group, served, settings, state, user


def _updated(observed: Observed, changes: list[KubeChange]) -> Observed:
    """The namespace after these updates were applied."""
    objects = dict(observed.objects)
    for change in changes:
        assert isinstance(change.details, ObjectUpdate)
        objects[change.kind, change.name] = served(change.details.manifest)
    return Observed(objects, {})


def _replicas(observed: Observed, name: str) -> object:
    return observed.objects["workload", name].body["spec"]["replicas"]


def test_asleep_is_replicas_zero_and_nothing_else() -> None:
    awake = state(user("kim"), user("saul", 10001))
    observed = applied(diff(awake, Observed()))
    hashes = {k: o.annotations["sup/applied-hash"] for k, o in observed.objects.items() if k[0] == "workload"}

    asleep = replace(awake, asleep=frozenset({Route("user", "kim")}))
    changes = diff(asleep, observed)
    assert brief(changes) == [("update", "workload", "login-kim")]
    (change,) = changes
    assert isinstance(change.details, ObjectUpdate)
    assert change.details.drift == {"spec.replicas": {"old": 1, "new": 0}}
    manifest = change.details.manifest
    # sleeping is no change of settings: the hash SUP applied stays the awake one
    assert manifest["metadata"]["annotations"]["sup/applied-hash"] == hashes["workload", "login-kim"]

    slept = _updated(observed, changes)
    assert _replicas(slept, "login-kim") == 0 and _replicas(slept, "login-saul") == 1
    assert diff(asleep, slept) == []
    assert brief(diff(awake, slept)) == [("update", "workload", "login-kim")]


def test_a_group_pod_sleeps_too() -> None:
    desired = state(user("kim"), groups=(group("physics", 5000, "kim"),))
    kube = settings(group_pods=["physics"])
    observed = applied(diff(desired, Observed(), kube))
    asleep = replace(desired, asleep=frozenset({Route("group", "physics")}))
    assert brief(diff(asleep, observed, kube)) == [("update", "workload", "group-physics")]
