"""Login pods stuck on an outdated template: which to read and which to replace (pure).

A StatefulSet with the default OrderedReady policy waits for its pod to be Running and Ready before
it rolls out a new template, so a pod that crash-loops (or cannot pull its image) because of a
template SUP has since fixed stays as it is: the fix never reaches it. SUP deletes such a pod, and
the StatefulSet recreates it from the current template (same name, same claims: the home is kept).

Read: only when some StatefulSet of SUP's has a rollout that is stuck by its own status (the
controller has seen the current template, `updateRevision` differs from `currentRevision`, and
fewer replicas are ready than wanted): then one labelled list of SUP's login pods. A pass where
every login pod is healthy reads no pod at all.

Replace a pod only when all of these hold:
- it carries SUP's labels and is controlled (ownerReferences, controller) by a StatefulSet SUP
  applied, by uid, that the desired state still wants, and that this plan does not change;
- the StatefulSet's controller has seen its current template (status.observedGeneration ==
  metadata.generation) and the pod was made from another one (its `controller-revision-hash`
  label is not the StatefulSet's `status.updateRevision`);
- a container (or init container) of it is waiting with one of STUCK (CrashLoopBackOff, an image
  it cannot pull, a configuration it cannot start with);
- it is not being deleted already.
A healthy pod, a pod on the current template, and any pod that is not SUP's are never touched; no
claim is ever deleted here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from sup.targets.base import UPDATE, Change
from sup.targets.kube import names
from sup.targets.kube.model import POD, WORKLOAD, KubeChange, ObservedObject, PodReplacement

STUCK = frozenset({"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError"})
REVISION_LABEL = "controller-revision-hash"
TARGET = "kube"


def _status(body: Mapping[str, Any]) -> Mapping[str, Any]:
    status: Mapping[str, Any] = body.get("status") or {}
    return status


def rollout_stuck(workload: ObservedObject) -> bool:
    """Does this StatefulSet's status say a new template has not reached all of its pods, and a pod
    is not ready (the situation a rollout cannot leave by itself)?"""
    status = _status(workload.body)
    generation = workload.metadata.get("generation")
    update, current = status.get("updateRevision"), status.get("currentRevision")
    unobserved = generation is None or status.get("observedGeneration") != generation
    if unobserved or not update or update == current:
        return False
    # the spec last: out of the watch cache it is decoded anew (packed.py), and most are not rolling
    wanted = (workload.body.get("spec") or {}).get("replicas", 1)
    return int(status.get("readyReplicas") or 0) < int(wanted)


def stuck_reason(pod: ObservedObject) -> tuple[str, str] | None:
    """(reason, message) of the first container waiting with a STUCK reason, else None."""
    status = _status(pod.body)
    for container in (*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())):
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason in STUCK:
            return str(reason), f"container {container.get('name')}: {waiting.get('message') or reason}"
    return None


def controller(pod: ObservedObject) -> Mapping[str, Any] | None:
    for reference in pod.metadata.get("ownerReferences") or ():
        if reference.get("controller") and reference.get("kind") == "StatefulSet":
            found: Mapping[str, Any] = reference
            return found
    return None


def is_login_pod(pod: ObservedObject) -> bool:
    labels = pod.labels
    return labels.get(names.MANAGED_BY) == names.MANAGER and labels.get(names.COMPONENT_LABEL) in (
        names.LOGIN,
        names.GROUP_LOGIN,
    )


def replacements(
    pods: Iterable[ObservedObject],
    workloads: Mapping[tuple[str, str], ObservedObject],
    wanted: Collection[tuple[str, str]],
    changing: Collection[tuple[str, str]],
    namespace: str,
) -> list[KubeChange]:
    """The login pods to replace (see the module's rules). `workloads`: SUP's observed objects;
    `wanted`: the keys the desired state calls for; `changing`: keys this plan creates or updates."""
    changes: list[KubeChange] = []
    for pod in pods:
        if pod.terminating or not is_login_pod(pod):
            continue
        owner = controller(pod)
        if owner is None:
            continue
        key = (WORKLOAD, str(owner.get("name", "")))
        workload = workloads.get(key)
        if workload is None or workload.uid != owner.get("uid") or key not in wanted or key in changing:
            continue
        status = _status(workload.body)
        update = str(status.get("updateRevision") or "")
        have = pod.labels.get(REVISION_LABEL, "")
        if (
            not update
            or status.get("observedGeneration") != workload.metadata.get("generation")
            or have == update
        ):
            continue
        stuck = stuck_reason(pod)
        if stuck is None:
            continue
        waiting, message = stuck
        reason = (
            f"{waiting} ({message}) on template revision {have or 'unknown'}, while StatefulSet "
            f"{workload.name}'s current one is {update}: a rollout never replaces a pod that is not "
            "ready, so SUP deletes it and the StatefulSet recreates it; its claims and home are kept"
        )
        details = PodReplacement(
            f"Pod {pod.name}", namespace, workload.name, waiting, have, update, reason, pod.uid
        )
        subject = workload.annotations.get(names.USER_ANNOTATION)
        changes.append(Change(TARGET, UPDATE, POD, pod.name, details, subject))
    return changes
