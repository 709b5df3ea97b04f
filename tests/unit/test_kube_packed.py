"""The watch cache's packed bodies read as the objects the API server sent, minus the managedFields
field sets, and take a fraction of the memory."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest

from sup.targets.kube import packed as packing
from sup.targets.kube.model import ObservedObject
from sup.targets.kube.packed import PackedBody


@pytest.fixture(autouse=True)
def fresh_sharing_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with the process's table of shared values empty, as a new `sup serve` does:
    it is bounded (SHARED_MAX) and global, so earlier tests in the same run (the Kubernetes suites)
    may have filled it, and a full table shares nothing new."""
    monkeypatch.setattr(packing, "_shared", {})


def statefulset(n: int) -> dict[str, Any]:
    spec = {
        "replicas": 1,
        "selector": {"matchLabels": {"app": f"login-{n}"}},
        "template": {
            "metadata": {"labels": {"app": f"login-{n}"}},
            "spec": {
                "securityContext": {"runAsUser": 10000 + n, "runAsNonRoot": True},
                "containers": [
                    {
                        "name": "login",
                        "image": "localhost/sup-login:0.1.0",
                        "ports": [{"containerPort": 2222, "name": "ssh"}],
                        "volumeMounts": [{"mountPath": "/home/x", "name": "home"}],
                        "env": [{"name": f"VAR{i}", "value": f"value-{n}-{i}"} for i in range(8)],
                    }
                ],
                "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": f"home-u{10000 + n}"}}],
            },
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": f"login-{n}",
            "uid": f"uid-{n}",
            "resourceVersion": str(1000 + n),
            "labels": {"app.kubernetes.io/managed-by": "sup"},
            "managedFields": [
                {
                    "manager": "sup",
                    "operation": "Apply",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": spec},
                },
                {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status"},
            ],
        },
        "spec": spec,
        "status": {"replicas": 1, "readyReplicas": 1, "currentRevision": "a", "updateRevision": "a"},
    }


def test_a_packed_body_reads_as_the_object_without_the_field_sets() -> None:
    body = statefulset(1)
    packed = PackedBody(body)
    assert list(packed) == list(body)
    assert len(packed) == len(body)
    assert packed["spec"] == body["spec"]
    assert packed.get("status") == body["status"]
    assert packed.get("data") is None
    with pytest.raises(KeyError):
        packed["data"]
    assert packed["metadata"]["managedFields"] == [
        {"manager": "sup", "operation": "Apply"},
        {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status"},
    ]
    expected = json.loads(json.dumps(body))
    for entry in expected["metadata"]["managedFields"]:
        entry.pop("fieldsV1", None)
        entry.pop("fieldsType", None)
    assert packed.unpacked() == expected
    # what a pass asks of it
    item = ObservedObject("workload", packed)
    assert (item.name, item.uid, item.resource_version) == ("login-1", "uid-1", "1001")
    assert item.applied_by("sup") and not item.applied_by("someone-else")


def test_a_packed_body_is_never_changed_by_what_a_reader_does_with_what_it_read() -> None:
    packed = PackedBody(statefulset(2))
    packed["spec"]["replicas"] = 0
    assert packed["spec"]["replicas"] == 1


def test_packed_bodies_take_a_fraction_of_the_decoded_ones() -> None:
    def held(make: Any) -> int:
        tracemalloc.start()
        kept = [make(statefulset(n)) for n in range(500)]
        size, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert len(kept) == 500
        return size

    decoded = held(lambda body: json.loads(json.dumps(body)))
    packed = held(PackedBody)
    assert packed * 3 < decoded, (packed, decoded)


def test_what_repeats_from_object_to_object_is_kept_once() -> None:
    # as two list pages decode them: no string or list in common
    first, second = (PackedBody(json.loads(json.dumps(statefulset(n)))) for n in (3, 4))
    one, other = first["metadata"], second["metadata"]
    assert one["managedFields"] is other["managedFields"]  # the same writers: one list
    assert next(iter(one["labels"])) is next(iter(other["labels"]))  # label keys interned
    assert first["status"] is second["status"]  # equal statuses: one dict
    assert one["uid"] != other["uid"]
    # values that differ only in type are not taken for each other
    ready = PackedBody({"metadata": {"name": "a"}, "status": {"ready": True}})
    counted = PackedBody({"metadata": {"name": "b"}, "status": {"ready": 1}})
    assert ready["status"] == {"ready": True} and counted["status"] == {"ready": 1}
    assert ready["status"]["ready"] is True and counted["status"]["ready"] == 1
    assert counted["status"]["ready"] is not True


def test_a_body_without_metadata_or_status_reads_as_it_was() -> None:
    packed = PackedBody({"kind": "ConfigMap", "data": {"a": "b"}})
    assert "metadata" not in packed and packed.get("status") is None
    assert packed.unpacked() == {"kind": "ConfigMap", "data": {"a": "b"}}
    with pytest.raises(KeyError):
        packed["metadata"]
