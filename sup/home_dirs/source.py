"""Who needs a home: SUP's login ConfigMaps in the users' namespace, listed then watched, through
SUP's own Kubernetes client (sup/targets/kube/client.py: the connection, paging, errors).

The selector takes every login pod's ConfigMap, a person's own and a group's: both carry `passwd`
(sup/targets/kube/login_files.py). The maker reads nothing else, and its Role allows nothing else
(get, list and watch of ConfigMaps in that namespace).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from sup.config.home_dirs import HomeDirsSettings
from sup.home_dirs.wanted import people_files
from sup.targets.kube.client import KubeClient
from sup.targets.kube.model import LOGIN_CONFIG
from sup.targets.kube.settings import KubeSettings

SELECTOR = "app.kubernetes.io/managed-by=sup,app.kubernetes.io/component in (login,group-login)"
WATCH_SECONDS = 300


class WatchBroke(Exception):
    """The watch cannot go on (410 Gone, an ERROR event, a line that is not JSON): list again."""


class ConfigMaps:
    def __init__(self, settings: HomeDirsSettings, client: KubeClient | None = None) -> None:
        self.client = client or KubeClient(
            KubeSettings(
                namespace=settings.namespace,
                kubeconfig=settings.kubeconfig,
                context=settings.context,
                timeout_seconds=settings.timeout_seconds,
                workers=2,
            )
        )

    def list(self) -> tuple[dict[str, str], str]:
        """name -> the passwd file of every login ConfigMap, and the list's resourceVersion."""
        items, version = self.client.list_packed(LOGIN_CONFIG, SELECTOR)
        return people_files(items), version

    def watch(self, version: str, seconds: int = WATCH_SECONDS) -> Iterator[tuple[str, dict[str, Any]]]:
        """(ADDED|MODIFIED|DELETED|BOOKMARK, body) from `version` until the API server ends it."""
        response = self.client.watch(LOGIN_CONFIG, SELECTOR, version, metadata_only=False, seconds=seconds)
        try:
            for line in _lines(response):
                try:
                    event = json.loads(line)
                except ValueError:
                    raise WatchBroke("a watch line that is not JSON") from None
                if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
                    raise WatchBroke("a watch event that is not an object")
                kind, body = str(event.get("type")), event["object"]
                if kind == "ERROR":
                    raise WatchBroke(f"watch error {body.get('code')}: {body.get('message')}")
                yield kind, body
        finally:
            response.release_conn()

    def close(self) -> None:
        self.client.close()


def _lines(response: Any) -> Iterator[bytes]:
    pending = b""
    for chunk in response.stream(65536, decode_content=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from (line for line in complete if line.strip())
    if pending.strip():
        yield pending
