"""Perform a plan: server-side apply and deletes, a few in flight at once, one result per change.

Phases, each finished before the next starts:
1. home claims, NetworkPolicies and login ConfigMaps (created or updated), and the orphan marks of
   claims;
2. Services and workloads; a workload is not created when its NetworkPolicy, its login ConfigMap or
   a claim it mounts failed in phase 1, so no login pod ever runs without its policy (that change
   fails, for its user);
3. login pods stuck on an outdated template are deleted (pods.py), for their StatefulSets to
   recreate them;
4. deletes: workloads first, then Services, NetworkPolicies and login ConfigMaps, then claims past
   their retention.
Creates are applied without `force`: should an object of that name appear between observe and apply,
a conflicting field makes the API server refuse rather than SUP take it over. Updates are forced:
they take back the fields SUP owns from whoever changed them by hand. Updates and deletes carry the
uid SUP observed, so an object deleted and recreated meanwhile by somebody else is not touched.
Deleting an object that is already gone succeeds. An update that must `recreate` its object (a
field that cannot change in place: a login Service's clusterIP) deletes it, by uid, and creates it
again, in phase 2. Report changes write nothing; those with an `error` come back as failures of
their subject.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sup.targets.base import CREATE, DELETE, REPORT, UPDATE, ApplyReport, Failure
from sup.targets.kube import names
from sup.targets.kube.client import KubeApiError, KubeClient
from sup.targets.kube.model import (
    API_KIND,
    KIND_NAME,
    LOGIN_CONFIG,
    NETWORK_POLICY,
    POD,
    PVC,
    SERVICE,
    WORKLOAD,
    KubeChange,
    KubeDetails,
    Manifest,
    NewObject,
    NotWritten,
    ObjectDelete,
    ObjectUpdate,
    OrphanMark,
    PodReplacement,
    needs,
)


def retention_manager(field_manager: str) -> str:
    """The field manager that owns only the orphaned-since annotation of claims."""
    return f"{field_manager}-retention"


class _Run:
    def __init__(self, client: KubeClient, field_manager: str, workers: int) -> None:
        self.client = client
        self.field_manager = field_manager
        self.workers = workers
        self.report = ApplyReport()

    def execute(self, changes: Sequence[KubeChange]) -> None:
        if not changes:
            return
        with ThreadPoolExecutor(max_workers=min(self.workers, len(changes))) as pool:
            outcomes = list(pool.map(self._one, changes))
        for change, error in zip(changes, outcomes, strict=True):
            if error is None:
                self.report.applied.append(change)
            else:
                self.report.failed.append(Failure(change, error))

    def _one(self, change: KubeChange) -> str | None:
        try:
            _perform(self.client, self.field_manager, change)
        except KubeApiError as exc:
            return f"{change.action} {KIND_NAME[change.kind]} {change.name}: {exc}"
        return None


def _perform(client: KubeClient, field_manager: str, change: KubeChange) -> None:
    details = change.details
    if change.action == DELETE and isinstance(details, ObjectDelete):
        client.delete(change.kind, change.name, details.uid or None)
    elif isinstance(details, PodReplacement):
        client.delete(POD, change.name, details.uid or None)
    elif isinstance(details, ObjectUpdate) and details.recreate:
        client.recreate(change.kind, change.name, details.uid, details.manifest, field_manager=field_manager)
    elif isinstance(details, NewObject | ObjectUpdate):
        body = details.manifest
        if isinstance(details, ObjectUpdate) and change.action == UPDATE and details.uid:
            body = {**body, "metadata": {**body["metadata"], "uid": details.uid}}
        client.apply(
            change.kind, change.name, body, field_manager=field_manager, force=change.action != CREATE
        )
    elif isinstance(details, OrphanMark):
        _mark(client, retention_manager(field_manager), change.name, details)
    else:  # pragma: no cover - diff.py makes no other kind of change
        raise KubeApiError(0, f"SUP does not know how to apply {change.action} {change.kind}")


def _mark(client: KubeClient, manager: str, name: str, mark: OrphanMark) -> None:
    """Set, or (new None) remove, the orphaned-since annotation under a field manager of its own, so
    this never touches the claim's other fields. Removing first takes the annotation over (forced),
    in case somebody else wrote it, and then applies it away."""
    metadata: dict[str, Any] = {"name": name}
    if mark.uid:
        metadata["uid"] = mark.uid
    bare = {"apiVersion": "v1", "kind": API_KIND[PVC], "metadata": metadata}

    def marked(since: str) -> dict[str, Any]:
        return {**bare, "metadata": {**metadata, "annotations": {names.ORPHANED_ANNOTATION: since}}}

    if mark.new is not None:
        client.apply(PVC, name, marked(mark.new), field_manager=manager, force=True)
        return
    if mark.old is not None:
        client.apply(PVC, name, marked(mark.old), field_manager=manager, force=True)
    client.apply(PVC, name, bare, field_manager=manager, force=True)


def apply_changes(
    client: KubeClient, field_manager: str, changes: Sequence[KubeChange], workers: int
) -> ApplyReport:
    run = _Run(client, field_manager, workers)
    for change in changes:
        if change.action == REPORT and isinstance(change.details, NotWritten) and change.details.error:
            run.report.failed.append(Failure(change, change.details.error))

    writes = [c for c in changes if c.action in (CREATE, UPDATE) and c.kind != POD]
    run.execute([c for c in writes if c.kind in (PVC, NETWORK_POLICY, LOGIN_CONFIG)])
    failed = {(f.change.kind, f.change.name) for f in run.report.failed if f.change.action != REPORT}
    second: list[KubeChange] = []
    for change in writes:
        if change.kind not in (SERVICE, WORKLOAD):
            continue
        missing = [
            need for need in needs(change.kind, change.name, _manifest(change.details)) if need in failed
        ]
        if missing and change.kind == WORKLOAD and change.action == CREATE:
            what = " and ".join(f"{API_KIND[kind]} {name}" for kind, name in missing)
            run.report.failed.append(Failure(change, f"not created: writing {what} failed"))
        else:
            second.append(change)
    run.execute(second)
    run.execute([c for c in changes if c.kind == POD and c.action == UPDATE])

    deletes = [c for c in changes if c.action == DELETE]
    for kinds in ((WORKLOAD,), (SERVICE, NETWORK_POLICY, LOGIN_CONFIG), (PVC,)):
        run.execute([c for c in deletes if c.kind in kinds])
    return run.report


def _manifest(details: KubeDetails) -> Manifest:
    return details.manifest if isinstance(details, NewObject | ObjectUpdate) else {}
