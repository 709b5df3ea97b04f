"""Volumes for the test node: a StorageClass whose claims get `local` PersistentVolumes.

The class uses `kubernetes.io/no-provisioner` with `WaitForFirstConsumer`, as a real site would with
local disks. With no-provisioner the scheduler does not pick a node for a claim (it waits for a PV
to exist): there is one node, so every pending claim gets its PV at once. `LocalProvisioner` is the
small loop that stands in for a provisioner, as a static local-volume provisioner does for disks: it
keeps a few unbound `ReadWriteOnce` PVs of the class ready (directories under the cluster's root, node
affinity to the node), which the scheduler binds to a new pod's claim at once; for a claim they cannot
serve (another access mode, more than SPARE_SIZE) it makes a PV pre-bound to that claim; and it deletes
each Released PV with its directory (the PVs are `Retain`: nothing else would).

Why a pool: a PV made for a claim after the pod asked for it races the scheduler's binding (a
conflict, then the scheduler's backoff of up to ~20 s per pod), which is not what a site's
provisioner costs.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any

import httpx

from sup.targets.kube.values import parse_quantity
from tests.support.kubeapi import Admin, ApiError

log = logging.getLogger(__name__)

SPARE = 3  # unbound PVs kept ready
SPARE_SIZE = "100Gi"  # what a spare PV offers (a directory: nothing enforces it)
SPARE_MODES = ["ReadWriteOnce"]


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
        volumes = self.admin.items("/api/v1/persistentvolumes")
        spare = [
            v
            for v in volumes
            if v["spec"].get("storageClassName") == self.class_name and not v["spec"].get("claimRef")
        ]
        for _ in range(SPARE - len(spare)):
            self._create(f"local-{uuid.uuid4()}", SPARE_SIZE, SPARE_MODES, "Filesystem", None)
        for claim in self.admin.items("/api/v1/persistentvolumeclaims"):
            if self._wants_volume(claim) and not self._spare_fits(claim):
                self._provision(claim)
        for volume in volumes:
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

    @staticmethod
    def _spare_fits(claim: dict[str, Any]) -> bool:
        """Whether a spare PV serves this claim (the scheduler binds it; nothing to make)."""
        spec = claim["spec"]
        size = spec.get("resources", {}).get("requests", {}).get("storage", "1Gi")
        return (
            set(spec.get("accessModes", ["ReadWriteOnce"])) <= set(SPARE_MODES)
            and spec.get("volumeMode", "Filesystem") == "Filesystem"
            and parse_quantity(size) <= parse_quantity(SPARE_SIZE)
        )

    def _provision(self, claim: dict[str, Any]) -> None:
        metadata, spec = claim["metadata"], claim["spec"]
        size = spec.get("resources", {}).get("requests", {}).get("storage", "1Gi")
        claim_ref = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": metadata["namespace"],
            "name": metadata["name"],
            "uid": metadata["uid"],
        }
        modes = spec.get("accessModes", ["ReadWriteOnce"])
        self._create(f"local-{metadata['uid']}", size, modes, spec.get("volumeMode", "Filesystem"), claim_ref)

    def _create(
        self, name: str, size: str, modes: list[str], volume_mode: str, claim_ref: dict[str, Any] | None
    ) -> None:
        path = self.directory / name
        path.mkdir(mode=0o755, exist_ok=True)
        path.chmod(0o755)  # root's; fsGroup makes it the pod's group's
        volume: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": {"sup-test/local-pv": "true"}},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": modes,
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": self.class_name,
                "volumeMode": volume_mode,
                "local": {"path": str(path)},
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
        if claim_ref is not None:
            volume["spec"]["claimRef"] = claim_ref
        with contextlib.suppress(ApiError):  # already made on an earlier round
            self.admin.create("/api/v1/persistentvolumes", volume)
