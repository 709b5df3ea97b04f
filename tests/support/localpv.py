"""Volumes for the test node: a StorageClass whose claims get `local` PersistentVolumes.

The class uses `kubernetes.io/no-provisioner` with `WaitForFirstConsumer`, as a real site would with
local disks. With no-provisioner the scheduler does not pick a node for a claim (it waits for a PV
to exist): there is one node, so every pending claim gets its PV at once. `LocalProvisioner` is the
small loop that stands in for a provisioner: every second it creates a PV (a directory under the
cluster's root, node affinity to the node, pre-bound to the claim) for each pending claim of the
class, and deletes each Released PV with its directory (the PVs are `Retain`: nothing else would).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.support.kubeapi import Admin, ApiError

log = logging.getLogger(__name__)


def storage_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        # the default class: claims that name none (a chart's, say) land here too
        "metadata": {"name": name, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Retain",
    }


class LocalProvisioner:
    def __init__(
        self, admin: Admin, class_name: str, node: str, directory: Path, interval: float = 1.0
    ) -> None:
        self.admin = admin
        self.class_name = class_name
        self.node = node
        self.directory = directory
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="local-pv-provisioner", daemon=True)

    def start(self) -> LocalProvisioner:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.once()
            except (httpx.HTTPError, ApiError) as exc:  # the API server may be going away
                log.debug("local PV provisioner: %s", exc)

    def once(self) -> None:
        for claim in self.admin.items("/api/v1/persistentvolumeclaims"):
            if self._wants_volume(claim):
                self._provision(claim)
        for volume in self.admin.items("/api/v1/persistentvolumes"):
            spec = volume["spec"]
            if spec.get("storageClassName") == self.class_name and volume.get("status", {}).get("phase") in (
                "Released",
                "Failed",
            ):
                self.admin.delete(f"/api/v1/persistentvolumes/{volume['metadata']['name']}")
                shutil.rmtree(self.directory / volume["metadata"]["name"], ignore_errors=True)

    def _wants_volume(self, claim: dict[str, Any]) -> bool:
        metadata, spec = claim["metadata"], claim["spec"]
        return (
            spec.get("storageClassName") == self.class_name
            and not spec.get("volumeName")
            and claim.get("status", {}).get("phase") == "Pending"
            and "deletionTimestamp" not in metadata
        )

    def _provision(self, claim: dict[str, Any]) -> None:
        metadata = claim["metadata"]
        name = f"local-{metadata['uid']}"
        path = self.directory / name
        path.mkdir(mode=0o755, exist_ok=True)
        path.chmod(0o755)  # root's; fsGroup makes it the pod's group's
        size = claim["spec"].get("resources", {}).get("requests", {}).get("storage", "1Gi")
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": {"sup-test/local-pv": "true"}},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": claim["spec"].get("accessModes", ["ReadWriteOnce"]),
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": self.class_name,
                "volumeMode": claim["spec"].get("volumeMode", "Filesystem"),
                "local": {"path": str(path)},
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": metadata["namespace"],
                    "name": metadata["name"],
                    "uid": metadata["uid"],
                },
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [self.node]}
                                ]
                            }
                        ]
                    }
                },
            },
        }
        with contextlib.suppress(ApiError):  # already made on an earlier round
            self.admin.create("/api/v1/persistentvolumes", volume)
