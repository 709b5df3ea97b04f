"""Fixtures for the tests of the real test node (tests/support/kubenode.py): the tiny busybox image
imported once, a namespace per test, and a helper that runs a pod and waits for it to be Ready."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.kubeapi import ApiError
from tests.support.kubenode import KubeCluster, new_name
from tests.support.testimage import BUSYBOX_IMAGE, TestImageUnavailable, busybox_archive

RunPod = Callable[..., dict[str, Any]]


@pytest.fixture(scope="session")
def busybox_image(kube_cluster: KubeCluster) -> str:
    try:
        archive = busybox_archive()
    except TestImageUnavailable as exc:
        if os.environ.get("SUP_TEST_NO_SKIP") == "1":
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(str(exc))
    kube_cluster.import_image(archive)
    return BUSYBOX_IMAGE


@pytest.fixture
def namespace(kube_cluster: KubeCluster) -> Iterator[str]:
    """A fresh namespace without Pod Security enforcement (tests that need it make their own)."""
    name = kube_cluster.new_namespace("node", pod_security=None)
    yield name
    if not kube_cluster.stopped:  # the teardown test stops it
        with contextlib.suppress(ApiError):
            kube_cluster.api.delete(f"/api/v1/namespaces/{name}")


def pod_manifest(
    name: str, image: str, command: list[str], *, labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": image,
        "imagePullPolicy": "Never",
        "command": command,
    }
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        # busybox as pid 1 ignores SIGTERM: do not wait 30 s for it on deletion
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [container], **spec},
    }


@pytest.fixture
def run_pod(kube_cluster: KubeCluster, busybox_image: str) -> RunPod:
    """run_pod(namespace, command=["sleep", "3600"], name=None, labels=None, **spec) -> the pod once
    Ready (spec: extra pod spec fields; `container=` extra container fields)."""

    def run(
        namespace: str,
        command: list[str] | None = None,
        name: str | None = None,
        labels: dict[str, str] | None = None,
        **spec: Any,
    ) -> dict[str, Any]:
        name = name or new_name("pod")
        manifest = pod_manifest(name, busybox_image, command or ["sleep", "3600"], labels=labels, **spec)
        kube_cluster.api.create(f"/api/v1/namespaces/{namespace}/pods", manifest)
        return kube_cluster.wait_pod_ready(namespace, name)

    return run
