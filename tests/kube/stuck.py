"""Pods and StatefulSet statuses as the controllers and the kubelet would write them, for tests against
an API server that runs neither (the status subresource takes what the test says)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.kube.site import Site
from tests.support.kubeapi import Admin

FIXTURES = Path(__file__).parent / "fixtures"
OLD, NEW = "rev-old", "rev-new"


def stuck_rollout(admin: Admin, site: Site, workload: str) -> dict[str, Any]:
    """The status the StatefulSet controller writes when its new template cannot reach a pod that
    is not ready."""
    sts = site.get("workload", workload)
    assert sts is not None
    status = {
        "observedGeneration": sts["metadata"]["generation"],
        "replicas": 1,
        "currentReplicas": 1,
        "readyReplicas": 0,
        "currentRevision": OLD,
        "updateRevision": NEW,
    }
    admin.merge_patch(site.path("workload", workload) + "/status", {"status": status})
    return sts


def login_pod(
    admin: Admin, site: Site, workload: str, status_from: str, *, controlled: bool = True
) -> dict[str, Any]:
    """The pod the StatefulSet controller would have made from the old revision, with the status
    the kubelet reports (from a fixture)."""
    sts = site.get("workload", workload)
    assert sts is not None
    template = sts["spec"]["template"]
    metadata: dict[str, Any] = {
        "name": f"{workload}-0",
        "labels": {**template["metadata"]["labels"], "controller-revision-hash": OLD},
    }
    if controlled:
        metadata["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": workload,
             "uid": sts["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        ]  # fmt: skip
    created = admin.create(site.path("pods"), {"metadata": metadata, "spec": template["spec"]})
    status = json.loads((FIXTURES / f"pod-{status_from}.json").read_text())["status"]
    for container in status["containerStatuses"]:
        container["image"] = template["spec"]["containers"][0]["image"]
    admin.merge_patch(site.path("pods", created["metadata"]["name"]) + "/status", {"status": status})
    return created
