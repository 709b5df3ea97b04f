"""The values passed between rendering, observing, diffing and applying, and the details of the
changes a plan holds."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sup.targets.base import Change
from sup.targets.kube.names import Owner
from sup.targets.kube.packed import pack_json, unpack_json

Manifest = dict[str, Any]

# Change kinds (what `sup plan` shows) and the Kubernetes kinds behind them.
PVC = "pvc"
WORKLOAD = "workload"
SERVICE = "service"
NETWORK_POLICY = "network_policy"
LOGIN_CONFIG = "login_config"  # a login pod's ConfigMap: passwd, group, keys (login_files.py)
API_KIND = {
    PVC: "PersistentVolumeClaim",
    WORKLOAD: "StatefulSet",
    SERVICE: "Service",
    NETWORK_POLICY: "NetworkPolicy",
    LOGIN_CONFIG: "ConfigMap",
}
KIND_OF = {api: kind for kind, api in API_KIND.items()}
# A login pod: never written, only read, and deleted when stuck on an outdated template (pods.py).
POD = "pod"
KIND_NAME = {**API_KIND, POD: "Pod"}


@dataclass(frozen=True)
class Wanted:
    """One object the desired state calls for, rendered, with SUP's labels and annotations.

    `packed`: the manifest as compressed JSON (packed.py); `manifest` decodes a fresh copy each time
    it is read. A pass with a cold memo renders every object the desired state calls for before it
    compares any (name clashes and blocked workloads are decided on the whole set): kept as decoded
    dicts they took some 25 KB a user (tracemalloc, 2,000 users), 1.2 GB at 50,000.
    `inputs`: what the manifest was rendered from, when the memo may remember it (memo.py).
    `verified`: set instead of a manifest when the memo knows the object is in sync: its needs.
    `claim`: a home claim's name (homes.py: by uid, or an adopted older claim's).
    `requires`: what a rendered workload must not run without (`needs`), worked out before packing.
    """

    kind: str
    owner: Owner
    packed: bytes
    inputs: Hashable | None = None
    verified: tuple[tuple[str, str], ...] | None = None
    claim: str = ""
    requires: tuple[tuple[str, str], ...] = ()

    @classmethod
    def rendered(
        cls, kind: str, owner: Owner, manifest: Manifest, inputs: Hashable | None = None, *, claim: str = ""
    ) -> Wanted:
        name = claim if kind == PVC else owner.login
        required = tuple(needs(kind, name, manifest))
        return cls(kind, owner, pack_json(manifest), inputs, claim=claim, requires=required)

    @classmethod
    def in_sync(
        cls, kind: str, owner: Owner, inputs: Hashable, verified: tuple[tuple[str, str], ...], claim: str = ""
    ) -> Wanted:
        """An object the memo knows to be in sync: nothing rendered, nothing to compare."""
        return cls(kind, owner, b"", inputs, verified, claim)

    @property
    def manifest(self) -> Manifest:
        """The rendered object: a new copy on every read (change it freely)."""
        return unpack_json(self.packed) if self.packed else {}

    @property
    def name(self) -> str:
        return self.claim if self.kind == PVC else self.owner.login  # as render._own sets it

    @property
    def needed(self) -> list[tuple[str, str]]:
        """What this object must not run without (see `needs`)."""
        return list(self.verified if self.verified is not None else self.requires)

    @property
    def subject(self) -> str | None:
        return self.owner.name if self.owner.kind == "user" else None


def user_object_keys(owner: Owner, claim: str | None) -> list[tuple[str, str]]:
    """(kind, name) of a user's objects rendered from templates: the home claim (none in the shared
    home mode), and the login policy, Service and workload (the login ConfigMap is rendered apart:
    login_files.py)."""
    home = [(PVC, claim)] if claim is not None else []
    return [*home, (NETWORK_POLICY, owner.login), (SERVICE, owner.login), (WORKLOAD, owner.login)]


def login_keys(owner: Owner) -> list[tuple[str, str]]:
    """(kind, name) of a user's login objects: named by the username, unlike the home claim."""
    return [
        (NETWORK_POLICY, owner.login),
        (LOGIN_CONFIG, owner.login),
        (SERVICE, owner.login),
        (WORKLOAD, owner.login),
    ]


def needs(kind: str, name: str, manifest: Manifest) -> list[tuple[str, str]]:
    """What a login workload must not run without: its NetworkPolicy, its login ConfigMap (when it
    mounts it: a ConfigMap volume named like the workload), and every claim it mounts."""
    if kind != WORKLOAD:
        return []
    volumes = manifest.get("spec", {}).get("template", {}).get("spec", {}).get("volumes") or []
    claims = [v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v]
    config = (
        [(LOGIN_CONFIG, name)] if any((v.get("configMap") or {}).get("name") == name for v in volumes) else []
    )
    return [(NETWORK_POLICY, name), *config, *((PVC, claim) for claim in claims)]


@dataclass(frozen=True)
class ObservedObject:
    """An object as the API server holds it: the whole body for SUP's, metadata only for others."""

    kind: str
    body: Mapping[str, Any]

    @property
    def metadata(self) -> Mapping[str, Any]:
        meta: Mapping[str, Any] = self.body.get("metadata") or {}
        return meta

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def uid(self) -> str:
        return str(self.metadata.get("uid", ""))

    @property
    def resource_version(self) -> str | None:
        version = self.metadata.get("resourceVersion")
        return str(version) if version else None

    @property
    def labels(self) -> Mapping[str, str]:
        labels: Mapping[str, str] = self.metadata.get("labels") or {}
        return labels

    @property
    def annotations(self) -> Mapping[str, str]:
        annotations: Mapping[str, str] = self.metadata.get("annotations") or {}
        return annotations

    @property
    def terminating(self) -> bool:
        return bool(self.metadata.get("deletionTimestamp"))

    def applied_by(self, field_manager: str) -> bool:
        """Did `field_manager` server-side apply this object (so SUP created it)?"""
        return any(
            entry.get("manager") == field_manager and entry.get("operation") == "Apply"
            for entry in self.metadata.get("managedFields") or ()
        )


@dataclass(frozen=True)
class Observed:
    """One complete read of SUP's namespace.

    `objects`: SUP's objects (labelled managed-by=sup, or server-side applied by SUP's field manager
    and since stripped of that label by hand), by (kind, name).
    `foreign`: every other object of those kinds, by (kind, name): SUP never writes them, and
    refuses to create an object under a name one of them holds.
    `scoped`: only some users' objects were read (observe_users): a home claim whose owner is not
    one of them may belong to a user that was not read, so the plan leaves it to a full pass.
    `pods`: by name, the login pods of SUP's StatefulSets whose rollout is stuck (pods.py): read only
    when some StatefulSet's status says so.
    `cache_version`: the watch cache's content version this read is all of (watch.py), or None
    (listed, or stuck pods read beside it): two reads of one version are the same read.
    `hollow`: no objects were copied out of the cache, because the last full pass planned nothing
    from this very version (unchanged.py); the target reads them in full if it must plan after all.
    """

    objects: Mapping[tuple[str, str], ObservedObject] = field(default_factory=dict)
    foreign: Mapping[tuple[str, str], ObservedObject] = field(default_factory=dict)
    scoped: bool = False
    pods: Mapping[str, ObservedObject] = field(default_factory=dict)
    cache_version: int | None = None
    hollow: bool = False


# --- change details: what a plan says and apply.py performs ----------------------------------------


@dataclass(frozen=True)
class NewObject:
    """A `create`: the manifest to apply, and the few fields a person checks (diff.summary)."""

    object: str  # e.g. "StatefulSet login-kim"
    namespace: str
    summary: Mapping[str, Any]
    manifest: Manifest

    def as_json(self) -> dict[str, Any]:
        return {"object": self.object, "namespace": self.namespace, **self.summary, "manifest": self.manifest}


@dataclass(frozen=True)
class ObjectUpdate:
    """An `update` that applies the manifest again (forced): the fields that drifted, by path, with
    their old and new values, and the uid observed (the object must still be that one).

    `recreate`: a field that cannot change on an existing object must (a login Service becoming
    headless, or no longer: its clusterIP is immutable), so the object observed is deleted (by uid)
    and the manifest created in its place (diff.py, `_recreated`)."""

    object: str
    namespace: str
    drift: Mapping[str, Any]
    reason: str | None
    uid: str
    manifest: Manifest
    recreate: bool = False

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"object": self.object, "namespace": self.namespace, **self.drift}
        if self.reason is not None:
            shown["reason"] = self.reason
        if self.recreate:
            shown["recreate"] = f"deleted and created again: {self.object} cannot change in place"
        return shown | {"uid": self.uid, "manifest": self.manifest}


@dataclass(frozen=True)
class OrphanMark:
    """An `update` of a home claim's orphaned-since annotation only: set (new) or removed (new None)."""

    object: str
    namespace: str
    old: str | None
    new: str | None
    reason: str
    uid: str

    def as_json(self) -> dict[str, Any]:
        return {
            "object": self.object,
            "namespace": self.namespace,
            "orphaned_since": {"old": self.old, "new": self.new},
            "reason": self.reason,
            "uid": self.uid,
        }


@dataclass(frozen=True)
class ObjectDelete:
    object: str
    reason: str
    uid: str

    def as_json(self) -> dict[str, Any]:
        return {"object": self.object, "reason": self.reason, "uid": self.uid}


@dataclass(frozen=True)
class PodReplacement:
    """An `update` of a login pod that is stuck on an outdated template: it is deleted (uid
    precondition) so that its StatefulSet recreates it from the current one. Nothing else goes: the
    StatefulSet, its claims and the home stay."""

    object: str  # e.g. "Pod login-kim-0"
    namespace: str
    workload: str  # the StatefulSet's name
    waiting: str  # the container's waiting reason, e.g. CrashLoopBackOff
    old_revision: str  # the pod's controller-revision-hash
    new_revision: str  # the StatefulSet's status.updateRevision
    reason: str
    uid: str

    def as_json(self) -> dict[str, Any]:
        return {
            "object": self.object,
            "namespace": self.namespace,
            "replace": f"deleted so that StatefulSet {self.workload} recreates it from its current template",
            "waiting": self.waiting,
            "revision": {"old": self.old_revision, "new": self.new_revision},
            "reason": self.reason,
            "uid": self.uid,
        }


@dataclass(frozen=True)
class NotWritten:
    """A `report` of an object SUP will not write: a failure for its subject."""

    error: str

    def as_json(self) -> dict[str, Any]:
        return {"error": self.error}


@dataclass(frozen=True)
class Remark:
    """A `report` that fails nobody: something SUP waits for or leaves as it is, and why."""

    reason: str

    def as_json(self) -> dict[str, Any]:
        return {"reason": self.reason}


KubeDetails = NewObject | ObjectUpdate | OrphanMark | ObjectDelete | PodReplacement | NotWritten | Remark
KubeChange = Change[KubeDetails]
