"""A narrow, typed client for the kinds of object SUP keeps (and the login pods it reads), on the
official `kubernetes` client.

The official client loads the connection (a kubeconfig, or the pod's service account when SUP runs in
the cluster: token refresh, TLS, exec plugins) and sends the requests. SUP reads and writes plain JSON
through its ApiClient rather than the generated models: a list of a thousand StatefulSets decodes in
milliseconds as JSON and in seconds as models, and server-side apply wants the exact body SUP
rendered. Every request is counted by the (verb, resource) the API server authorized it as (an
apply that creates needs `patch` and `create`), which the RBAC tests compare with the chart's Role;
warnings the API server sends back (Pod Security `warn`, deprecations) are kept.

Errors: KubeApiError with the HTTP status and the API server's message (never a token or a body).
"""

from __future__ import annotations

import builtins
import json
import os
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

from sup.targets.base import TargetError
from sup.targets.kube.model import LOGIN_CONFIG, NETWORK_POLICY, POD, PVC, SERVICE, WORKLOAD
from sup.targets.kube.packed import PackedBody
from sup.targets.kube.settings import KubeSettings
from sup.targets.kube.values import reached_through

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
# The metadata of each object only (name, labels, annotations, managedFields): enough to know which
# names are taken by objects SUP did not create.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
# ... and of each object a watch sends (watch.py)
METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"


@dataclass(frozen=True)
class Resource:
    group_path: str  # /api/v1 or /apis/GROUP/VERSION
    plural: str

    def collection(self, namespace: str) -> str:
        return f"{self.group_path}/namespaces/{namespace}/{self.plural}"


RESOURCES: dict[str, Resource] = {
    PVC: Resource("/api/v1", "persistentvolumeclaims"),
    WORKLOAD: Resource("/apis/apps/v1", "statefulsets"),
    SERVICE: Resource("/api/v1", "services"),
    NETWORK_POLICY: Resource("/apis/networking.k8s.io/v1", "networkpolicies"),
    LOGIN_CONFIG: Resource("/api/v1", "configmaps"),
    POD: Resource("/api/v1", "pods"),  # read (list) and deleted only: pods.py
}


class KubeApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status} {message}" if status else message)
        self.status = status
        self.message = message


# --- the parts of the official client SUP uses, typed ---------------------------------------------


class _Response(Protocol):
    status: int
    reason: str

    def read(self) -> bytes: ...

    @property
    def headers(self) -> Mapping[str, str]: ...


class _ApiClient(Protocol):
    def param_serialize(
        self,
        method: str,
        resource_path: str,
        path_params: Any = None,
        query_params: list[tuple[str, str]] | None = None,
        header_params: dict[str, str] | None = None,
        body: Any = None,
        post_params: Any = None,
        files: Any = None,
        auth_settings: list[str] | None = None,
    ) -> tuple[str, str, dict[str, str], Any, Any]: ...

    def call_api(
        self,
        method: str,
        url: str,
        header_params: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: float | tuple[float, float] | None = None,
    ) -> _Response: ...

    def close(self) -> None: ...


def _load(settings: KubeSettings) -> _ApiClient:
    from kubernetes import client as kube_client
    from kubernetes import config as kube_config

    configuration = kube_client.Configuration()
    try:
        if settings.kubeconfig:
            if not os.path.isfile(settings.kubeconfig):
                raise TargetError(
                    f"kube.kubeconfig {settings.kubeconfig} is not a readable file", terminal=True
                )
            kube_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=settings.kubeconfig,
                context=settings.context,
                client_configuration=configuration,
                persist_config=False,
            )
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            raise TargetError(
                "kube.kubeconfig is not set and SUP is not running in a pod: set SUP_KUBE__KUBECONFIG",
                terminal=True,
            )
    except kube_config.ConfigException as exc:
        raise TargetError(f"cannot load the Kubernetes configuration: {exc}", terminal=True) from None
    _refuse_egress_to_the_api_server(settings, configuration.host)
    configuration.connection_pool_maxsize = max(settings.workers, 2)
    return cast(_ApiClient, kube_client.ApiClient(configuration))


def _refuse_egress_to_the_api_server(settings: KubeSettings, host: str) -> None:
    """kube.egress_cidrs must not let login pods reach the API server SUP talks to (in a pod, the
    `kubernetes` Service's address): cluster_cidrs and blocked_cidrs are carved out of them. Only an
    address is checked; a host name is not resolved here."""
    carved = [*settings.blocked_cidrs, *settings.cluster_cidrs]
    address = urlsplit(host).hostname
    if address:
        network = reached_through(address, settings.egress_cidrs, carved)
        if network is not None:
            raise TargetError(
                f"kube.egress_cidrs {network} lets login pods reach the Kubernetes API server at "
                f"{address}: add the API server's and the cluster's ranges to kube.cluster_cidrs (they "
                "are carved out of egress_cidrs), or narrow egress_cidrs",
                terminal=True,
            )


class KubeClient:
    """The namespace's objects of SUP's kinds, as JSON."""

    def __init__(self, settings: KubeSettings, api: _ApiClient | None = None) -> None:
        self.namespace = settings.namespace
        self.timeout = float(settings.timeout_seconds)
        self.page_size = settings.page_size
        self.api = api if api is not None else _load(settings)
        self.requests: Counter[tuple[str, str]] = Counter()  # by the verb RBAC authorized
        self.sent = 0  # HTTP requests
        self.warnings: list[str] = []
        # what this client wrote, for the watch cache to wait for (watch.py): per kind the highest
        # resourceVersion an apply answered with, and the objects it deleted
        self.written: dict[str, int] = {}
        self.deleted: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    @property
    def writes(self) -> int:
        """Write requests sent (an apply is one request, whether it created the object or not)."""
        return sum(n for (verb, _), n in self.requests.items() if verb in ("patch", "delete"))

    def close(self) -> None:
        self.api.close()

    # --- requests --------------------------------------------------------------------------------

    def _call(
        self,
        verb: str,
        resource: Resource,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        # a str is sent as it is; a dict is encoded as JSON by the official client
        body: str | dict[str, Any] | None = None,
        content_type: str | None = None,
        accept: str = "application/json",
        ok_missing: bool = False,
    ) -> dict[str, Any] | None:
        headers = {"Accept": accept}
        if content_type:
            headers["Content-Type"] = content_type
        with self._lock:
            self.requests[verb, resource.plural] += 1
            self.sent += 1
        try:
            serialized = self.api.param_serialize(
                method, path, query_params=query or None, header_params=headers, body=body,
                auth_settings=["BearerToken"],
            )  # fmt: skip
            method_, url, header_params, payload, _ = serialized
            response = self.api.call_api(method_, url, header_params, payload, _request_timeout=self.timeout)
            data = response.read()
        except TargetError:
            raise
        except Exception as exc:  # the connection failed: refused, reset, TLS, timeout
            raise KubeApiError(0, f"cannot reach the API server: {type(exc).__name__}: {exc}") from None
        warning = response.headers.get("Warning")
        if warning:
            with self._lock:
                self.warnings.append(warning)
        if response.status == 201 and method == "PATCH":
            # server-side apply created the object: the API server authorized `create` too
            with self._lock:
                self.requests["create", resource.plural] += 1
        if response.status == 404 and ok_missing:
            return None
        if not 200 <= response.status < 300:
            raise KubeApiError(response.status, _message(data, response.reason))
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            raise KubeApiError(
                response.status, "the API server answered with something that is not JSON"
            ) from None
        if not isinstance(parsed, dict):
            raise KubeApiError(
                response.status, "the API server answered with something that is not an object"
            )
        return parsed

    def list(self, kind: str, label_selector: str, *, metadata_only: bool = False) -> list[dict[str, Any]]:
        """Every object of `kind` matching the selector, page by page (one consistent snapshot)."""
        items: list[dict[str, Any]] = []
        for page, _ in self._pages(kind, label_selector, metadata_only=metadata_only):
            items.extend(page)
        return items

    def list_packed(
        self, kind: str, label_selector: str, *, metadata_only: bool = False
    ) -> tuple[builtins.list[PackedBody], str]:
        """`list`, and the resourceVersion of its snapshot (the first page's: every later page is
        read at that version), from which a watch continues (watch.py); each object packed
        (packed.py) as soon as its page is decoded. A pass that lists 10,000 StatefulSets then
        never holds them all as decoded JSON (some 44 KB of Python objects each, measured), only
        one page of them."""
        items: list[PackedBody] = []
        version = ""
        for page, snapshot in self._pages(kind, label_selector, metadata_only=metadata_only):
            items.extend(PackedBody(item) for item in page)
            version = snapshot
        return items, version

    def _pages(
        self, kind: str, label_selector: str, *, metadata_only: bool
    ) -> Iterator[tuple[builtins.list[dict[str, Any]], str]]:
        """Each page's objects, with the snapshot's resourceVersion (the first page's)."""
        resource = RESOURCES[kind]
        version = ""
        token = ""
        while True:
            query = [("labelSelector", label_selector), ("limit", str(self.page_size))]
            if token:
                query.append(("continue", token))
            page = self._call(
                "list", resource, "GET", resource.collection(self.namespace), query=query,
                accept=METADATA_LIST if metadata_only else "application/json",
            )  # fmt: skip
            assert page is not None
            found = page.get("items")
            if found is None and str(page.get("kind", "")).endswith("List"):
                found = []  # an empty metadata-only list comes without `items`
            if not isinstance(found, list):
                raise KubeApiError(200, f"a list of {resource.plural} without items")
            meta = page.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            token = str(meta.get("continue") or "")
            del page  # only `found` is kept past this page
            yield found, version
            if not token:
                return

    def watch(
        self, kind: str, label_selector: str, resource_version: str, *, metadata_only: bool, seconds: int
    ) -> Any:
        """Open a watch of `kind` from `resource_version`, with bookmarks: the streaming urllib3
        response, one JSON event a line (watch.py reads it). The API server ends it after about
        `seconds`. A refusal (410 Gone: the version is compacted) raises KubeApiError."""
        resource = RESOURCES[kind]
        query = [
            ("labelSelector", label_selector),
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(seconds)),
        ]
        headers = {"Accept": METADATA if metadata_only else "application/json"}
        with self._lock:
            self.requests["watch", resource.plural] += 1
            self.sent += 1
        try:
            method, url, header_params, _, _ = self.api.param_serialize(
                "GET", resource.collection(self.namespace), query_params=query, header_params=headers,
                auth_settings=["BearerToken"],
            )  # fmt: skip
            # the read timeout outlasts the server's end of the stream; bookmarks keep it busy
            response = self.api.call_api(
                method, url, header_params, None, _request_timeout=(self.timeout, seconds + self.timeout)
            )
        except Exception as exc:
            raise KubeApiError(0, f"cannot reach the API server: {type(exc).__name__}: {exc}") from None
        if response.status != 200:
            raise KubeApiError(response.status, _message(response.read(), response.reason))
        return getattr(response, "response", response)

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        resource = RESOURCES[kind]
        return self._call(
            "get", resource, "GET", f"{resource.collection(self.namespace)}/{name}", ok_missing=True
        )

    def apply(
        self, kind: str, name: str, body: Mapping[str, Any], *, field_manager: str, force: bool
    ) -> dict[str, Any]:
        """Server-side apply: the API server merges `body` and records its fields as the manager's."""
        resource = RESOURCES[kind]
        query = [("fieldManager", field_manager), ("force", "true" if force else "false")]
        result = self._call(
            "patch", resource, "PATCH", f"{resource.collection(self.namespace)}/{name}", query=query,
            body=json.dumps(body), content_type=APPLY_PATCH,
        )  # fmt: skip
        assert result is not None
        version = str((result.get("metadata") or {}).get("resourceVersion") or "")
        if version.isdigit():
            with self._lock:
                self.written[kind] = max(self.written.get(kind, 0), int(version))
        return result

    def set_replicas(
        self, kind: str, name: str, replicas: int, *, field_manager: str
    ) -> dict[str, Any] | None:
        """A merge patch of `spec.replicas` alone, as `field_manager` (an Update, beside that
        manager's applied fields, which it leaves as they are): waking a login pod at once
        (wake.py). None if the object does not exist."""
        resource = RESOURCES[kind]
        result = self._call(
            "patch", resource, "PATCH", f"{resource.collection(self.namespace)}/{name}",
            query=[("fieldManager", field_manager)], body={"spec": {"replicas": replicas}},
            content_type=MERGE_PATCH, ok_missing=True,
        )  # fmt: skip
        if result is not None:
            version = str((result.get("metadata") or {}).get("resourceVersion") or "")
            if version.isdigit():
                with self._lock:
                    self.written[kind] = max(self.written.get(kind, 0), int(version))
        return result

    def delete(self, kind: str, name: str, uid: str | None, *, noted: bool = True) -> bool:
        """Delete the object if it is still the one SUP saw (uid); False if it was gone already.
        `noted`: recorded in `deleted`, for the watch cache to wait until the name is gone."""
        resource = RESOURCES[kind]
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
        }
        if uid:
            options["preconditions"] = {"uid": uid}
        result = self._call(
            "delete", resource, "DELETE", f"{resource.collection(self.namespace)}/{name}",
            body=options, content_type="application/json", ok_missing=True,
        )  # fmt: skip
        if noted:
            with self._lock:
                self.deleted.add((kind, name))
        return result is not None

    def recreate(
        self, kind: str, name: str, uid: str, body: Mapping[str, Any], *, field_manager: str
    ) -> dict[str, Any]:
        """Delete the object if it is still the one SUP saw (uid), then create `body` in its place
        (server-side apply, not forced): for a field that cannot change in place. The delete is not
        noted in `deleted` (which makes the watch cache wait until the name is gone): the create's
        resourceVersion, noted in `written`, comes after it, so a cache that shows the new object
        has seen the delete too."""
        self.delete(kind, name, uid, noted=False)
        return self.apply(kind, name, body, field_manager=field_manager, force=False)


def _message(data: bytes, reason: str) -> str:
    """The API server's own explanation (a Status object's message), else the HTTP reason."""
    try:
        status = json.loads(data)
    except ValueError:
        return reason
    if isinstance(status, dict) and status.get("message"):
        return str(status["message"])
    return reason
