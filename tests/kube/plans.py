"""Helpers for the pure tests: desired states, and observed objects as the API server would hold what
SUP applied (with its defaults and SUP's managedFields entry)."""

from __future__ import annotations

import copy
import datetime
import itertools
from typing import Any

from sup.config import Settings
from sup.domain.desired import DesiredGroup, DesiredState, DesiredUser
from sup.targets.kube import KubeSettings
from sup.targets.kube.diff import plan
from sup.targets.kube.model import KIND_OF, KubeChange, NewObject, Observed, ObservedObject
from sup.targets.kube.render import Renderer

NOW = datetime.datetime(2026, 5, 1, 12, 0, tzinfo=datetime.UTC)


def settings(**kube: Any) -> KubeSettings:
    result = Settings(kube={"namespace": "research", **kube}).kube
    assert result is not None
    return result


def user(name: str, uid: int = 10000, *, active: bool = True) -> DesiredUser:
    return DesiredUser(
        username=name, uid_number=uid, gid_number=uid, display_name=None, given_name=None,
        family_name=None, email=None, home_directory=f"/home/{name}", login_shell="/bin/bash",
        ssh_public_keys=(), active=active,
    )  # fmt: skip


def state(*users: DesiredUser, groups: tuple[DesiredGroup, ...] = ()) -> DesiredState:
    return DesiredState(users={u.username: u for u in users}, groups={g.name: g for g in groups})


def group(name: str, gid: int, *members: str) -> DesiredGroup:
    return DesiredGroup(
        name=name, gid_number=gid, description=None, members=frozenset(members), private=False
    )


_versions = itertools.count(1)


def served(
    manifest: dict[str, Any], *, manager: str = "sup", uid: str = "uid-1", **metadata: Any
) -> ObservedObject:
    """What the API server holds after `manager` applied `manifest`: plus its defaults, and a
    resourceVersion of its own (the API server gives every write a new one)."""
    body = copy.deepcopy(manifest)
    body.pop("apiVersion", None)
    body.pop("kind", None)
    meta = body["metadata"]
    meta.update(
        {
            "uid": uid,
            "resourceVersion": str(next(_versions)),
            "managedFields": [{"manager": manager, "operation": "Apply"}],
        }
    )
    meta.update(metadata)
    kind = KIND_OF[manifest["kind"]]
    spec = body.setdefault("spec", {})
    if kind == "workload":
        spec.update({"podManagementPolicy": "OrderedReady", "revisionHistoryLimit": 10})
        pod = spec["template"]["spec"]
        pod.update(
            {"dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler"}
        )
        for container in pod["containers"]:
            container["terminationMessagePath"] = "/dev/termination-log"
    elif kind == "service":
        # a headless Service keeps the clusterIP None it asked for; any other gets an address
        spec.update({"clusterIP": spec.get("clusterIP") or "10.0.0.7", "sessionAffinity": "None"})
    elif kind == "pvc":
        spec["volumeMode"] = "Filesystem"
        body["status"] = {"phase": "Pending"}
    return ObservedObject(kind, body)


def applied(changes: list[KubeChange]) -> Observed:
    """The namespace after these creates were applied."""
    objects = {}
    for change in changes:
        if change.action == "create" and isinstance(change.details, NewObject):
            objects[change.kind, change.name] = served(change.details.manifest)
    return Observed(objects, {})


def diff(
    desired: DesiredState, observed: Observed, kube: KubeSettings | None = None, now: datetime.datetime = NOW
) -> list[KubeChange]:
    kube = kube or settings()
    return plan(desired, observed, Renderer(kube), kube, now)


def brief(changes: list[KubeChange]) -> list[tuple[str, str, str]]:
    return [(c.action, c.kind, c.name) for c in changes]
