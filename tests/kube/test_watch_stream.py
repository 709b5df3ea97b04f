"""The watch cache's streams without an API server: events applied, and a 410 Gone, a line that is
not JSON or a broken connection makes the cache untrusted until it relisted (watch.py)."""

from __future__ import annotations

import json
import queue
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from sup.targets.kube import watch
from sup.targets.kube.model import API_KIND, SERVICE
from sup.targets.kube.packed import PackedBody
from sup.targets.kube.settings import KubeSettings

END = b""


def _obj(name: str, version: int, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(version), **meta}}


def _event(kind: str, body: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": body}).encode() + b"\n"


class FakeResponse:
    def __init__(self, lines: queue.Queue[bytes]) -> None:
        self.lines = lines
        self.closed = False

    def stream(self, amt: int, decode_content: bool) -> Iterator[bytes]:
        while not self.closed:
            try:
                line = self.lines.get(timeout=0.05)
            except queue.Empty:
                continue
            if line == END:
                raise OSError("the connection broke")
            yield line

    def shutdown(self) -> None:
        self.closed = True

    def release_conn(self) -> None:
        self.closed = True


class FakeClient:
    """Lists answer `listed` at `version`; each watch of the service OURS stream reads `lines`; the
    other streams' watches stay open and quiet."""

    def __init__(self) -> None:
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.listed: list[dict[str, Any]] = []
        self.version = "100"
        self.requests: Counter[tuple[str, str]] = Counter()
        self.watched_from: list[str] = []

    def list_packed(
        self, kind: str, selector: str, *, metadata_only: bool = False
    ) -> tuple[list[PackedBody], str]:
        self.requests["list", kind] += 1
        listed = self.listed if kind == SERVICE and not metadata_only else []
        return [PackedBody(item) for item in listed], self.version

    def watch(self, kind: str, selector: str, version: str, *, metadata_only: bool, seconds: int) -> Any:
        if kind == SERVICE and not metadata_only:
            self.watched_from.append(version)
            return FakeResponse(self.lines)
        return FakeResponse(queue.Queue())

    def close(self) -> None:
        pass


@pytest.fixture
def cache() -> Iterator[tuple[watch.WatchCache, FakeClient]]:
    made = watch.WatchCache(
        KubeSettings(namespace="ns", kubeconfig="/dev/null"),
        {watch.OURS_STREAM: "ours", watch.OTHERS_STREAM: "others"},
    )
    client = FakeClient()
    made._client = client  # type: ignore[assignment]
    for kind in API_KIND:
        for which in (watch.OURS_STREAM, watch.OTHERS_STREAM):
            made.seed(kind, which, [_obj("a", 90)] if (kind, which) == (SERVICE, "ours") else [], "100")
    yield made, client
    made.stop()


def _until(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _services(cache: watch.WatchCache) -> dict[str, str]:
    snapshot = cache.snapshot(wait=0.5)
    assert snapshot is not None
    return {b["metadata"]["name"]: b["metadata"]["resourceVersion"] for b in snapshot[SERVICE, "ours"]}


def test_events_and_bookmarks_are_applied(cache: tuple[watch.WatchCache, FakeClient]) -> None:
    made, client = cache
    client.lines.put(_event("ADDED", _obj("b", 101)))
    client.lines.put(_event("MODIFIED", _obj("a", 102)))
    client.lines.put(_event("DELETED", _obj("b", 103)))
    client.lines.put(_event("BOOKMARK", _obj("", 110)))
    _until(lambda: made._streams[SERVICE, "ours"].version == 110)
    assert _services(made) == {"a": "102"}


def test_a_pass_waits_for_sups_own_writes(cache: tuple[watch.WatchCache, FakeClient]) -> None:
    made, client = cache
    made.note_writes({SERVICE: 105}, {(SERVICE, "a")})
    assert made.snapshot(wait=0.1) is None  # neither the write nor the delete seen yet
    client.lines.put(_event("DELETED", _obj("a", 104)))
    assert made.snapshot(wait=0.1) is None  # the write at 105 is not seen yet
    client.lines.put(_event("ADDED", _obj("c", 105)))
    assert _services(made) == {"c": "105"}


@pytest.mark.parametrize(
    "line",
    [
        _event("ERROR", {"kind": "Status", "code": 410, "message": "too old resource version: 1"}),
        b"{not json\n",
        END,  # the connection breaks
    ],
    ids=["410-gone", "not-json", "broken"],
)
def test_a_broken_watch_is_not_trusted_until_relisted(
    cache: tuple[watch.WatchCache, FakeClient], monkeypatch: pytest.MonkeyPatch, line: bytes
) -> None:
    made, client = cache
    monkeypatch.setattr(watch, "BACKOFF_SECONDS", (0.5, 0.5))
    client.listed = [_obj("z", 200)]
    client.version = "200"
    client.lines.put(line)
    _until(lambda: not made.live())
    assert made.snapshot(wait=0) is None
    _until(made.live)  # relisted by itself after the backoff, watching again from the list's version
    assert _services(made) == {"z": "200"}
    assert client.requests["list", SERVICE] == 1
    assert client.watched_from[-1] == "200"


def test_stop_ends_every_thread(cache: tuple[watch.WatchCache, FakeClient]) -> None:
    made, _ = cache
    threads = [s.thread for s in made._streams.values()]
    assert all(t is not None and t.is_alive() for t in threads)
    made.stop()
    assert not any(t is not None and t.is_alive() for t in threads)
    assert made.snapshot(wait=0) is None


def test_a_relist_older_than_a_write_still_waits_for_it(
    cache: tuple[watch.WatchCache, FakeClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    made, client = cache
    monkeypatch.setattr(watch, "BACKOFF_SECONDS", (0.2, 0.2))
    client.version = "200"
    made.note_writes({SERVICE: 300}, set())  # written while the broken watch relists at 200
    client.lines.put(END)
    _until(lambda: client.requests["list", SERVICE] == 1 and made.live())
    assert made.snapshot(wait=0.1) is None
    client.lines.put(_event("ADDED", _obj("w", 300)))
    assert _services(made) == {"w": "300"}
