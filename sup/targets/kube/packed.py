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
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

EAGER = ("metadata", "status")  # read on every pass: kept decoded
MANAGED_FIELDS_KEPT = ("manager", "operation", "subresource")  # what applied_by and people read


def _slim_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    slim = dict(metadata)
    managed = metadata.get("managedFields")
    if isinstance(managed, list):
        slim["managedFields"] = [
            {key: entry[key] for key in MANAGED_FIELDS_KEPT if key in entry}
            for entry in managed
            if isinstance(entry, Mapping)
        ]
    return slim


def pack_json(value: Any) -> bytes:
    """`value` as compressed JSON (fast, level 1: this is about memory, not storage)."""
    return zlib.compress(json.dumps(value, separators=(",", ":")).encode(), 1)


def unpack_json(packed: bytes) -> Any:
    return json.loads(zlib.decompress(packed))


class PackedBody(Mapping[str, Any]):
    __slots__ = ("_eager", "_keys", "_packed")

    def __init__(self, body: Mapping[str, Any]) -> None:
        eager: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for key, value in body.items():
            if key == "metadata" and isinstance(value, Mapping):
                eager[key] = _slim_metadata(value)
            elif key in EAGER:
                eager[key] = value
            else:
                rest[key] = value
        self._eager = eager
        self._keys = tuple(body)
        self._packed = pack_json(rest) if rest else b""

    def __getitem__(self, key: str) -> Any:
        if key in self._eager:
            return self._eager[key]
        if key not in self._keys:
            raise KeyError(key)
        return self.unpacked()[key]

    def unpacked(self) -> dict[str, Any]:
        """The object (its managedFields reduced as above): the packed part decoded anew, metadata
        and status the cache's own (read them, never change them)."""
        rest: dict[str, Any] = unpack_json(self._packed) if self._packed else {}
        return {key: self._eager[key] if key in self._eager else rest[key] for key in self._keys}

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        name = self._eager.get("metadata", {}).get("name")
        return f"PackedBody({name!r}, {len(self._packed)} bytes packed)"
