"""A full pass whose inputs are those of the last one that planned nothing plans nothing again.

Served from the watch cache, a full pass still renders and compares every object: at 10,000 people
that is about 0.8 s of CPU (BENCHMARKS.md, "No-change full pass"), in the same process and under the
same GIL as the LDAP and Slurm passes beside it. The plan is a function of the desired state, the
observed objects, the settings and templates, and the clock. So when a full pass planned nothing,
the next one plans nothing too if:
- the watch cache holds the same content (its version: no event since, and no relist);
- the desired state is equal;
- the renderer's fingerprint (the settings and every template text) is the same;
- the clock has not reached the first moment it changes the plan. The clock's one use is home-claim
  retention: a claim marked orphaned is deleted once `pvc_retention` has passed since the mark.

Anything else (a pass that listed, stuck pods read beside the cache, any change planned) forgets
what was kept. What is kept holds the desired state the pass planned from. DesiredCache holds the
same user and group objects, so that costs little memory.
"""

from __future__ import annotations

import datetime
import threading
import weakref
from dataclasses import dataclass

from sup.domain.desired import DesiredState
from sup.targets.kube import names
from sup.targets.kube.diff import parse_time
from sup.targets.kube.model import PVC, KubeChange, Observed
from sup.targets.kube.values import parse_retention
from sup.targets.kube.watch import WatchCache


@dataclass(frozen=True)
class _NothingPlanned:
    version: int
    fingerprint: str
    desired: DesiredState
    until: datetime.datetime | None  # the first moment retention changes the plan; None: never


_KEPT: weakref.WeakKeyDictionary[WatchCache, _NothingPlanned] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def kept_version(cache: WatchCache | None) -> int | None:
    """The cache version of the last full pass that planned nothing, if one is kept."""
    if cache is None:
        return None
    with _LOCK:
        kept = _KEPT.get(cache)
    return kept.version if kept is not None else None


def nothing_again(
    cache: WatchCache | None,
    observed: Observed,
    fingerprint: str,
    desired: DesiredState,
    now: datetime.datetime,
) -> bool:
    """True when the plan of these inputs is known to be empty."""
    if cache is None or observed.cache_version is None or observed.scoped:
        return False
    with _LOCK:
        kept = _KEPT.get(cache)
    return (
        kept is not None
        and kept.version == observed.cache_version
        and kept.fingerprint == fingerprint
        and (kept.until is None or now < kept.until)
        and (kept.desired is desired or kept.desired == desired)
    )


def remember(
    cache: WatchCache | None,
    observed: Observed,
    fingerprint: str,
    desired: DesiredState,
    pvc_retention: str,
    changes: list[KubeChange],
) -> None:
    """Keep a full pass's inputs when it planned nothing; forget them otherwise."""
    if cache is None or observed.scoped:
        return
    version = observed.cache_version
    with _LOCK:
        if changes or version is None:
            _KEPT.pop(cache, None)
            return
        until = _first_retirement(observed, parse_retention(pvc_retention))
        _KEPT[cache] = _NothingPlanned(version, fingerprint, desired, until)


def _first_retirement(observed: Observed, retention: datetime.timedelta | None) -> datetime.datetime | None:
    """When the first claim marked orphaned is due for deletion (None: never, `keep`)."""
    if retention is None:
        return None
    due: datetime.datetime | None = None
    for (kind, _), item in observed.objects.items():
        if kind != PVC:
            continue
        marked = item.annotations.get(names.ORPHANED_ANNOTATION)
        since = parse_time(marked) if marked is not None else None
        if since is not None and (due is None or since + retention < due):
            due = since + retention
    return due
