"""A process-level cache of the namespace's objects, fed by watches, that a full pass reads instead
of listing everything (observe.py).

Per (kubeconfig, context, namespace, field manager) one WatchCache; per kind two streams, the same
two reads a listing pass makes: SUP's labelled objects in full, everything else metadata-only (the
watch takes the same PartialObjectMetadata Accept header). A stream is seeded by a pass's paged list
and the list's resourceVersion, then a daemon thread watches from that version with bookmarks and
applies each event (one JSON object a line, decoded with `json`). When the API server ends the
stream on its timeout the thread watches again from the last version it saw.

Trust. A pass uses the cache only when `snapshot` says so: every stream is seeded and live (no error
since its seed) and has caught up with SUP's own last writes: for each kind the highest
resourceVersion an apply answered with has been reached by one of the kind's streams, and every
object SUP deleted is gone from them (or terminating). It waits for that at most `WAIT_SECONDS`,
else the pass lists as before, and that list reseeds every stream. A 410 Gone (the version was
compacted), a broken stream, an ERROR event or a line that is not JSON marks the stream untrusted;
its thread relists by itself after a backoff and resumes watching from the new list.

Comparing resourceVersions: the API server calls them opaque, but with its etcd3 storage (the only
one Kubernetes has) they are etcd revisions, one counter for the whole store that grows with every
write, so "this stream has seen version >= what an apply answered" means it has seen that write. A
version that is not a decimal number is never trusted (the pass lists).

Hand-made drift is seen: every write by anyone is an event on one of the streams. An object whose
label is removed by hand leaves the labelled stream (a DELETED event) and enters the metadata one:
observe reads it in full by name, as after a list. The cache holds each body packed (packed.py:
metadata and status decoded, the rest compressed JSON decoded when a pass reads it, which with the
memo warm is only for objects that changed) and never changes one in place.

Cost control: watches start only at the `START_AFTER`-th full observe of a process in a namespace
(default: the second), so a one-shot `sup reconcile` never starts them; `sup serve` runs passes
until it stops. `reset()` stops every cache (tests call it between tests).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sup.targets.kube.client import KubeClient
from sup.targets.kube.model import API_KIND
from sup.targets.kube.packed import PackedBody
from sup.targets.kube.settings import KubeSettings

log = logging.getLogger("sup.targets.kube.watch")

WAIT_SECONDS = 2.0  # how long a pass waits for the watches to show SUP's own last writes
WATCH_SECONDS = 300  # the API server ends each watch after this; the thread watches again
BACKOFF_SECONDS = (1.0, 30.0)  # first and longest wait before relisting a broken stream
START_AFTER = 1  # full observes of a namespace that only list before watches start
OURS_STREAM, OTHERS_STREAM = "ours", "others"  # the two streams of a kind
Body = Mapping[str, Any]


class _Expired(Exception):
    """The stream cannot go on from its version: relist."""


def _version(body: Mapping[str, Any]) -> int | None:
    text = str((body.get("metadata") or {}).get("resourceVersion") or "")
    return int(text) if text.isdigit() else None


def _name(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("name") or "")


@dataclass
class _Stream:
    kind: str
    which: str  # OURS_STREAM (full objects) or OTHERS_STREAM (metadata only)
    selector: str
    objects: dict[str, Body] = field(default_factory=dict)
    version: int = 0
    live: bool = False
    epoch: int = 0  # bumped by every seed: events of an older watch are dropped
    response: Any = None  # the open watch, to cut when reseeded or stopped
    thread: threading.Thread | None = None


class WatchCache:
    """The namespace's objects of SUP's kinds as the watches last saw them. Thread-safe."""

    def __init__(self, settings: KubeSettings, selectors: Mapping[str, str]) -> None:
        self.settings = settings
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._client: KubeClient | None = None
        self._streams = {
            (kind, which): _Stream(kind, which, selectors[which])
            for kind in API_KIND
            for which in (OURS_STREAM, OTHERS_STREAM)
        }
        self._written: dict[str, int] = {}
        self._deleted: set[tuple[str, str]] = set()
        self._content = 0  # counts every change to what the streams hold (not bookmarks)
        self.observes = 0  # full observes seen (START_AFTER)

    @property
    def client(self) -> KubeClient:
        """The cache's own client (the pass's closes with its target); its requests are counted."""
        if self._client is None:
            # one connection per stream, plus a relist
            self._client = KubeClient(self.settings.model_copy(update={"workers": len(self._streams) + 2}))
        return self._client

    # --- what a pass does --------------------------------------------------------------------------

    def wanted(self) -> bool:
        """Count a full observe; True when the cache should be seeded (or used) from now on."""
        with self._cond:
            self.observes += 1
            return self.observes > START_AFTER

    def snapshot(self, wait: float = WAIT_SECONDS) -> dict[tuple[str, str], list[Body]] | None:
        """(kind, OURS|OTHERS) -> the objects, if the cache can be trusted (module docstring);
        None: list instead."""
        taken = self.versioned_snapshot(wait)
        return None if taken is None else taken[1]

    def versioned_snapshot(
        self, wait: float = WAIT_SECONDS
    ) -> tuple[int, dict[tuple[str, str], list[Body]]] | None:
        """`snapshot`, and the version of its content: two snapshots of one version hold the same
        objects (a pass may then reuse what it derived from the first: unchanged.py)."""
        with self._cond:
            if not all(s.live for s in self._streams.values()):
                return None  # a watch is down: nothing to wait for
            if not self._cond.wait_for(self._trusted, timeout=wait):
                return None
            self._deleted.clear()  # seen gone: a later object of that name is a new one
            return self._content, {
                key: list(stream.objects.values()) for key, stream in self._streams.items()
            }

    def _trusted(self) -> bool:
        if self._stop.is_set() or not all(s.live for s in self._streams.values()):
            return False
        for kind, version in self._written.items():
            if max(self._streams[kind, w].version for w in (OURS_STREAM, OTHERS_STREAM)) < version:
                return False
        for kind, name in self._deleted:
            for which in (OURS_STREAM, OTHERS_STREAM):
                body = self._streams[kind, which].objects.get(name)
                if body is not None and not (body.get("metadata") or {}).get("deletionTimestamp"):
                    return False
        return True

    def seed(
        self, kind: str, which: str, items: Sequence[Body], resource_version: str, *, by_pass: bool = True
    ) -> None:
        """Replace a stream's objects with a list's, and watch from its version. A pass that listed
        calls this for every stream (`by_pass`): its list came after every write SUP noted, so
        those are forgotten; a watch thread's relist may have started before a write, so it forgets
        only the writes its version covers."""
        if not resource_version.isdigit():
            return  # never trusted: the stream stays as it is (not live after an error)
        packed: dict[str, Body] = {
            _name(item): item if isinstance(item, PackedBody) else PackedBody(item) for item in items
        }
        with self._cond:
            if self._stop.is_set():
                return
            stream = self._streams[kind, which]
            stream.objects = packed
            self._content += 1
            stream.version = int(resource_version)
            stream.live = True
            stream.epoch += 1
            _cut(stream.response)
            if by_pass or self._written.get(kind, 0) <= stream.version:
                self._written.pop(kind, None)
            if by_pass:
                self._deleted = {(k, n) for k, n in self._deleted if k != kind}
            if stream.thread is None:
                stream.thread = threading.Thread(
                    target=self._run, args=(stream,), name=f"sup-kube-watch-{kind}-{which}", daemon=True
                )
                stream.thread.start()
            self._cond.notify_all()

    def note_writes(self, written: Mapping[str, int], deleted: set[tuple[str, str]]) -> None:
        """What a pass's apply wrote: the next snapshot waits until the watches show it."""
        with self._cond:
            for kind, version in written.items():
                if kind in API_KIND:
                    self._written[kind] = max(self._written.get(kind, 0), version)
            self._deleted |= {(kind, name) for kind, name in deleted if kind in API_KIND}

    def requests(self) -> Counter[tuple[str, str]]:
        """The requests the cache's own client sent (watches, relists), by RBAC verb."""
        return Counter(self._client.requests) if self._client is not None else Counter()

    def versions(self) -> dict[tuple[str, str], str]:
        """(kind, name) -> resourceVersion of every object the streams hold (tests compare this
        with a list)."""
        with self._cond:
            return {
                (kind, name): str(body["metadata"].get("resourceVersion"))
                for (kind, _), stream in self._streams.items()
                for name, body in stream.objects.items()
            }

    def live(self) -> bool:
        with self._cond:
            return all(s.live for s in self._streams.values())

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every watch thread and close the connections."""
        with self._cond:
            self._stop.set()
            for stream in self._streams.values():
                stream.live = False
                _cut(stream.response)
            self._cond.notify_all()
        for stream in self._streams.values():
            if stream.thread is not None:
                stream.thread.join(timeout)
        if self._client is not None:
            self._client.close()

    # --- the watch threads -------------------------------------------------------------------------

    def _run(self, stream: _Stream) -> None:
        backoff = BACKOFF_SECONDS[0]
        while not self._stop.is_set():
            with self._cond:
                epoch, version = stream.epoch, stream.version
                if not stream.live:
                    epoch = -1
            try:
                if epoch < 0:
                    self._relist(stream)
                else:
                    self._watch(stream, epoch, version)
                backoff = BACKOFF_SECONDS[0]
                continue
            except Exception as exc:  # 410, a broken stream, not JSON: the stream is not trusted
                if self._stop.is_set():
                    return
                with self._cond:
                    if epoch >= 0 and stream.epoch != epoch:
                        continue  # cut by a reseed: watch from the new version at once
                    stream.live = False
                log.info("watch of %s (%s) broke: %s; relisting", stream.kind, stream.which, exc)
            self._stop.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_SECONDS[1])

    def _relist(self, stream: _Stream) -> None:
        items, version = self.client.list_packed(
            stream.kind, stream.selector, metadata_only=stream.which == OTHERS_STREAM
        )
        if not version.isdigit():
            raise _Expired(f"a list without a numeric resourceVersion ({version!r})")
        self.seed(stream.kind, stream.which, items, version, by_pass=False)

    def _watch(self, stream: _Stream, epoch: int, version: int) -> None:
        response = self.client.watch(
            stream.kind, stream.selector, str(version), metadata_only=stream.which == OTHERS_STREAM,
            seconds=WATCH_SECONDS,
        )  # fmt: skip
        with self._cond:
            if stream.epoch != epoch or self._stop.is_set():
                _cut(response)
                return
            stream.response = response
        try:
            for line in _lines(response):
                if not self._apply(stream, epoch, json.loads(line)):
                    return
        finally:
            with self._cond:
                if stream.response is response:
                    stream.response = None
            _cut(response)

    def _apply(self, stream: _Stream, epoch: int, event: Any) -> bool:
        """Apply one event; False when the stream was reseeded meanwhile (stop reading it)."""
        if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
            raise _Expired("a watch event that is not an object")
        kind, body = event.get("type"), event["object"]
        if kind == "ERROR":  # 410 Gone: compacted; anything else: start over too
            raise _Expired(f"watch error {body.get('code')}: {body.get('message')}")
        version = _version(body)
        if version is None:
            raise _Expired("a watch event without a numeric resourceVersion")
        packed = PackedBody(body) if kind in ("ADDED", "MODIFIED") else None
        with self._cond:
            if stream.epoch != epoch:
                return False
            if packed is not None:
                stream.objects[_name(body)] = packed
                self._content += 1
            elif kind == "DELETED":
                stream.objects.pop(_name(body), None)
                self._content += 1
            elif kind != "BOOKMARK":
                raise _Expired(f"a watch event of type {kind!r}")
            stream.version = max(stream.version, version)
            self._cond.notify_all()
        return True


def _lines(response: Any) -> Any:
    """The stream's lines (a line may arrive in several chunks)."""
    pending = b""
    for chunk in response.stream(65536, decode_content=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


def _cut(response: Any) -> None:
    """Close a watch from another thread: shutting the socket down wakes the reader."""
    if response is None:
        return
    try:
        if hasattr(response, "shutdown"):
            response.shutdown()
        response.release_conn()
    except Exception:  # already closed
        log.debug("closing a watch", exc_info=True)


# --- the process's caches --------------------------------------------------------------------------

_CACHES: dict[tuple[str | None, str | None, str, str], WatchCache] = {}
_LOCK = threading.Lock()


def cache_for(settings: KubeSettings, selectors: Mapping[str, str]) -> WatchCache | None:
    """The process's cache for this API server, namespace and field manager; None when disabled."""
    if not settings.watch:
        return None
    key = (settings.kubeconfig, settings.context, settings.namespace, settings.field_manager)
    with _LOCK:
        cache = _CACHES.get(key)
        if cache is None:
            cache = _CACHES[key] = WatchCache(settings, selectors)
        return cache


def caches() -> list[WatchCache]:
    with _LOCK:
        return list(_CACHES.values())


def reset() -> None:
    """Stop and forget every cache of the process (tests, between tests)."""
    with _LOCK:
        found = list(_CACHES.values())
        _CACHES.clear()
    for cache in found:
        cache.stop()
