"""What differs between the object SUP wants and the one the API server holds, in the fields SUP sets.

The API server adds defaults (a pod's dnsPolicy, a Service's clusterIP, a PVC's volumeMode) and other
field managers may add fields of their own: neither is drift. So the comparison is a subset one: every
value SUP sets must be there, equal; what else the object holds is not SUP's business. Lists follow
Kubernetes' merge rules: the associative ones (containers, volumes, env, mounts, container and
Service ports) match items by key and ignore items others added; every other list is atomic (one
owner for the whole list, as for NetworkPolicy rules) and must be equal as a whole, so that an
ingress rule added by hand counts as drift. Quantities compare by value ("4" equals "4000m").

Fields SUP stopped setting (a node selector removed from the settings, say) do not show here; the
applied-hash annotation catches them (see diff.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sup.targets.kube.values import InvalidValue, parse_quantity

MISSING: Any = None  # how an absent field is shown in a diff

# list field -> the item fields that identify an item (Kubernetes' patchMergeKey / listMapKeys)
_ASSOCIATIVE: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "volumes": ("name",),
    "env": ("name",),
    "imagePullSecrets": ("name",),
    "volumeMounts": ("mountPath",),
}


def differences(want: Any, have: Any, path: str = "") -> dict[str, dict[str, Any]]:
    """{path: {"old": observed, "new": wanted}} for every field SUP sets that differs."""
    found: dict[str, dict[str, Any]] = {}
    _compare(want, have, path, found, atomic=False)
    return found


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, Mapping | list) and not value)


def _compare(want: Any, have: Any, path: str, found: dict[str, dict[str, Any]], *, atomic: bool) -> None:
    if isinstance(want, Mapping):
        if _is_empty(want) and _is_empty(have):
            return  # `{}` sent and omitted by the server, e.g. an empty selector
        if not isinstance(have, Mapping):
            found[path] = {"old": have, "new": dict(want)}
            return
        for key, value in want.items():
            _compare(value, have.get(key), _join(path, str(key)), found, atomic=atomic)
        if atomic:
            extra = sorted(str(k) for k in have.keys() - want.keys() if not _is_empty(have[k]))
            for key in extra:
                found[_join(path, key)] = {"old": have[key], "new": MISSING}
        return
    if isinstance(want, list):
        if not want and _is_empty(have):
            return  # `[]` sent, omitted by the server (e.g. a NetworkPolicy with no ingress rule)
        if not isinstance(have, list):
            found[path] = {"old": have, "new": want}
            return
        key = _list_key(path, want)
        if key is None or atomic:
            _compare_atomic(want, have, path, found)
        else:
            _compare_associative(want, have, path, key, found)
        return
    if not _scalar_equal(want, have, path):
        found[path] = {"old": have, "new": want}


def _list_key(path: str, items: Sequence[Any]) -> tuple[str, ...] | None:
    field = path.rsplit(".", 1)[-1].split("[", 1)[0]
    if not all(isinstance(i, Mapping) for i in items):
        return None
    if field in _ASSOCIATIVE:
        return _ASSOCIATIVE[field]
    if field == "ports" and all("containerPort" in i for i in items):
        return ("containerPort", "protocol")
    if path == "spec.ports":  # a Service's ports
        return ("port", "protocol")
    return None


def _item_id(item: Mapping[str, Any], key: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(item.get(k, "TCP" if k == "protocol" else None) for k in key)


def _compare_associative(
    want: Sequence[Any],
    have: Sequence[Any],
    path: str,
    key: tuple[str, ...],
    found: dict[str, dict[str, Any]],
) -> None:
    present = {_item_id(i, key): i for i in have if isinstance(i, Mapping)}
    for item in want:
        ident = _item_id(item, key)
        label = ",".join(str(v) for v in ident if v is not None)
        _compare(item, present.get(ident), f"{path}[{label}]", found, atomic=False)


def _compare_atomic(
    want: Sequence[Any], have: Sequence[Any], path: str, found: dict[str, dict[str, Any]]
) -> None:
    local: dict[str, dict[str, Any]] = {}
    if len(want) != len(have):
        local[path] = {"old": list(have), "new": list(want)}
    else:
        for index, (w, h) in enumerate(zip(want, have, strict=True)):
            _compare(w, h, f"{path}[{index}]", local, atomic=True)
    if local:  # an atomic list is replaced as a whole: show it whole
        found[path] = {"old": list(have), "new": list(want)}


def _scalar_equal(want: Any, have: Any, path: str) -> bool:
    if want == have and type(want) is type(have):
        return True
    if ".resources." in f".{path}." and isinstance(want, str | int) and isinstance(have, str | int):
        try:
            return parse_quantity(want) == parse_quantity(have)
        except InvalidValue:
            return False
    return False
