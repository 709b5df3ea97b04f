"""Read the namespace in bulk: for each kind, one label-selected list of SUP's objects and one
metadata-only list of everything else (paged, each a consistent snapshot).

An object is SUP's when the API server's managedFields say SUP's field manager server-side applied
it, not merely because it carries SUP's label: an object somebody labelled by hand stays theirs.
An object SUP applied whose label was removed by hand is found by the second list and read in full
(a rare GET), so drift repair puts the label back. Login pods are read (one labelled list) only when
a StatefulSet's status says its rollout is stuck (pods.py). Any failed request raises ObserveError:
nothing is planned, so nothing is deleted, on a partial read.

In a long-running process the same two reads per kind come from a cache fed by watches when it can
be trusted (watch.py); a pass that lists seeds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sup.targets.base import ObserveError
from sup.targets.kube import names
from sup.targets.kube.client import KubeApiError, KubeClient
from sup.targets.kube.homes import mounted_by_uid
from sup.targets.kube.model import API_KIND, POD, PVC, WORKLOAD, Observed, ObservedObject, login_keys
from sup.targets.kube.pods import controller, rollout_stuck
from sup.targets.kube.settings import KubeSettings
from sup.targets.kube.watch import OTHERS_STREAM, OURS_STREAM, WatchCache, cache_for

OURS = f"{names.MANAGED_BY}={names.MANAGER}"
OTHERS = f"{names.MANAGED_BY}!={names.MANAGER}"


def watch_cache(settings: KubeSettings) -> WatchCache | None:
    """The process's watch cache of this namespace (kube.watch), streams selected as `observe` lists."""
    return cache_for(settings, {OURS_STREAM: OURS, OTHERS_STREAM: OTHERS})


def observe(
    client: KubeClient,
    field_manager: str,
    cache: WatchCache | None = None,
    *,
    unchanged_since: int | None = None,
) -> Observed:
    """The whole namespace; from `cache` when it can be trusted, else listed (and the cache seeded
    from the lists, when it is wanted). When the cache's content is still at `unchanged_since`, a
    hollow Observed: no object is built (unchanged.py)."""
    objects: dict[tuple[str, str], ObservedObject] = {}
    foreign: dict[tuple[str, str], ObservedObject] = {}
    cache = cache if cache is not None and cache.wanted() else None
    taken = cache.versioned_snapshot() if cache is not None else None
    version, cached = taken if taken is not None else (None, None)
    if version is not None and version == unchanged_since:
        return Observed(cache_version=version, hollow=True)
    ours: Sequence[Mapping[str, Any]]
    others: Sequence[Mapping[str, Any]]
    try:
        for kind in API_KIND:
            if cached is not None:
                ours, others = cached[kind, OURS_STREAM], cached[kind, OTHERS_STREAM]
            else:
                ours, ours_version = client.list_packed(kind, OURS)
                others, others_version = client.list_packed(kind, OTHERS, metadata_only=True)
                if cache is not None:
                    cache.seed(kind, OURS_STREAM, ours, ours_version)
                    cache.seed(kind, OTHERS_STREAM, others, others_version)
            for body in ours:
                item = ObservedObject(kind, body)
                (objects if item.applied_by(field_manager) else foreign)[kind, item.name] = item
            for meta in others:
                item = ObservedObject(kind, meta)
                if not item.applied_by(field_manager):
                    foreign[kind, item.name] = item
                    continue
                full = client.get(kind, item.name)
                if full is not None:  # deleted in between: then it is simply not there
                    objects[kind, item.name] = ObservedObject(kind, full)
        pods = _stuck_pods(
            client, objects, f"{OURS},{names.COMPONENT_LABEL} in ({names.LOGIN},{names.GROUP_LOGIN})"
        )
    except KubeApiError as exc:
        raise ObserveError(f"cannot read namespace {client.namespace}: {exc}") from None
    # Stuck pods are read apart from the cache: what they show has no version there.
    return Observed(objects, foreign, pods=pods, cache_version=None if pods else version)


def _stuck_pods(
    client: KubeClient, objects: dict[tuple[str, str], ObservedObject], selector: str
) -> dict[str, ObservedObject]:
    """The login pods of SUP's StatefulSets whose rollout is stuck: one list, only if there are any."""
    stuck = {w.name for (kind, _), w in objects.items() if kind == WORKLOAD and rollout_stuck(w)}
    if not stuck:
        return {}
    found: dict[str, ObservedObject] = {}
    for body in client.list(POD, selector):
        pod = ObservedObject(POD, body)
        owner = controller(pod)
        if owner is not None and owner.get("name") in stuck:
            found[pod.name] = pod
    return found


def observe_users(client: KubeClient, field_manager: str, usernames: Iterable[str]) -> Observed:
    """Only these users' objects: for a pass that the outbox scoped to a few users. Their login
    objects are read by name (three GETs a user); their home claims, named by uid (homes.py), by one
    list of SUP's claims labelled with their names (a renamed user's claim still carries the old
    name, which the outbox names too), plus by name the claims their workloads mount and any claim
    of the older naming (home-KEY). Classified as `observe` does; any failed request raises
    ObserveError."""
    objects: dict[tuple[str, str], ObservedObject] = {}
    foreign: dict[tuple[str, str], ObservedObject] = {}

    def found(kind: str, body: dict[str, Any]) -> None:
        item = ObservedObject(kind, body)
        (objects if item.applied_by(field_manager) else foreign)[kind, item.name] = item

    owners = [names.Owner("user", username) for username in sorted(set(usernames))]
    try:
        for owner in owners:
            for kind, name in login_keys(owner):
                body = client.get(kind, name)
                if body is not None:
                    found(kind, body)
        if owners:
            keys = ",".join(sorted({owner.key for owner in owners}))
            for body in client.list(PVC, f"{OURS},{names.USER_LABEL} in ({keys})"):
                found(PVC, body)
        wanted_claims = {owner.legacy_home for owner in owners} | set(mounted_by_uid(Observed(objects)))
        for name in sorted(wanted_claims):
            if (PVC, name) in objects or (PVC, name) in foreign:
                continue
            body = client.get(PVC, name)
            if body is not None:
                found(PVC, body)
        pods: dict[str, ObservedObject] = {}
        if owners:
            keys = ",".join(sorted({owner.key for owner in owners}))
            pods = _stuck_pods(client, objects, f"{OURS},{names.USER_LABEL} in ({keys})")
    except KubeApiError as exc:
        raise ObserveError(f"cannot read namespace {client.namespace}: {exc}") from None
    return Observed(objects, foreign, scoped=True, pods=pods)
