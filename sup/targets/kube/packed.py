"""How the watch cache keeps an object for the life of the process: small.

At 50,000 users the namespace holds about 250,000 of SUP's objects. Kept as the dicts `json` decodes
(a StatefulSet with its managedFields is some 15 KB of Python objects) they would take gigabytes for
as long as `sup serve` runs. A pass reads little of most objects: the metadata (name, uid,
resourceVersion, labels, annotations, who applied it) and a StatefulSet's status; the memo
(memo.py) skips rendering and comparing every object whose resourceVersion it already verified, so
the rest of a body is read only for the few objects that changed.

So a PackedBody keeps `metadata` and `status` decoded, with the managedFields entries reduced to
who wrote them and how (their `fieldsV1` field sets, the bulk of the metadata, are read by nobody
here), and the rest of the object as compressed JSON, decoded again each time a key of it is read
(nothing decoded is kept). It is a read-only Mapping: code that reads `body["spec"]` or
`body.get("metadata")` works unchanged.

What stays decoded is mostly the same from object to object, so it is kept once (issue 27: the
cache was some 2.4 KB an object, 600 MB at 50,000 users, most of it copies of the same strings and
lists): the metadata's strings are interned (a user's name appears in five objects' names, labels
and annotations; the label keys in all of them), and values that repeat whole (managedFields
`[{"manager": "sup", "operation": "Apply"}]`, finalizers, a Service's empty status, the key tuple)
are shared through a bounded table. Only uid and resourceVersion, unique by nature, are left alone.
Sharing is why what a PackedBody hands out must never be changed in place: metadata and status are
the cache's own, and may be every object's.
"""

from __future__ import annotations

import json
import sys
import threading
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

MANAGED_FIELDS_KEPT = ("manager", "operation", "subresource")  # what applied_by and people read
UNIQUE = frozenset({"uid", "resourceVersion"})  # never repeat: interning them would only cost
SHARED_MAX = 20_000  # distinct values the table keeps (a StatefulSet's status is per user: the cap)
_ABSENT: Any = object()

_shared: dict[Any, Any] = {}
_shared_lock = threading.Lock()


def _frozen(value: Any) -> Any:
    """A hashable form of a JSON value, equal exactly when the values are (True is not 1 here)."""
    if isinstance(value, dict):
        return (dict, *((key, _frozen(item)) for key, item in value.items()))
    if isinstance(value, list | tuple):
        return (type(value), *(_frozen(item) for item in value))
    return value if type(value) is str else (type(value), value)


def shared(value: Any) -> Any:
    """The one copy of a value equal to `value` (which becomes that copy while the table has room)."""
    key = _frozen(value)
    found = _shared.get(key, _ABSENT)
    if found is not _ABSENT:
        return found
    with _shared_lock:
        if len(_shared) < SHARED_MAX:
            return _shared.setdefault(key, value)
    return value


def _interned(value: Any) -> Any:
    return sys.intern(value) if type(value) is str else value


def _slim_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    slim: dict[str, Any] = {}
    for key, value in metadata.items():
        key = sys.intern(key)
        if key == "managedFields" and isinstance(value, list):
            value = shared(
                [
                    {sys.intern(k): _interned(entry[k]) for k in MANAGED_FIELDS_KEPT if k in entry}
                    for entry in value
                    if isinstance(entry, Mapping)
                ]
            )
        elif isinstance(value, dict) and key in ("labels", "annotations"):
            value = {sys.intern(k): _interned(v) for k, v in value.items()}
        elif isinstance(value, list | dict):
            value = shared(value)
        elif key not in UNIQUE:
            value = _interned(value)
        slim[key] = value
    return slim


def pack_json(value: Any) -> bytes:
    """`value` as compressed JSON (fast, level 1: this is about memory, not storage)."""
    return zlib.compress(json.dumps(value, separators=(",", ":")).encode(), 1)


def unpack_json(packed: bytes) -> Any:
    return json.loads(zlib.decompress(packed))


class PackedBody(Mapping[str, Any]):
    __slots__ = ("_keys", "_metadata", "_packed", "_status")

    def __init__(self, body: Mapping[str, Any]) -> None:
        rest: dict[str, Any] = {}
        self._metadata: Any = _ABSENT
        self._status: Any = _ABSENT
        for key, value in body.items():
            if key == "metadata" and isinstance(value, Mapping):
                self._metadata = _slim_metadata(value)
            elif key == "metadata":
                self._metadata = value
            elif key == "status":
                self._status = shared(value) if isinstance(value, dict | list) else value
            else:
                rest[key] = value
        self._keys: tuple[str, ...] = shared(tuple(sys.intern(key) for key in body))
        self._packed = pack_json(rest) if rest else b""

    def _eager(self, key: str) -> Any:
        if key == "metadata":
            return self._metadata
        if key == "status":
            return self._status
        return _ABSENT

    def __getitem__(self, key: str) -> Any:
        value = self._eager(key)
        if value is not _ABSENT:
            return value
        if key not in self._keys:
            raise KeyError(key)
        return self.unpacked()[key]

    def unpacked(self) -> dict[str, Any]:
        """The object (its managedFields reduced as above): the packed part decoded anew, metadata
        and status the cache's own (read them, never change them)."""
        rest: dict[str, Any] = unpack_json(self._packed) if self._packed else {}
        result: dict[str, Any] = {}
        for key in self._keys:
            value = self._eager(key)
            result[key] = rest[key] if value is _ABSENT else value
        return result

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        metadata = self._metadata if isinstance(self._metadata, Mapping) else {}
        return f"PackedBody({metadata.get('name')!r}, {len(self._packed)} bytes packed)"
