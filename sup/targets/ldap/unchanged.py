"""A full pass whose inputs are those of the last one that planned nothing plans nothing again.

At 10,000 people a full read of SUP's OUs takes about a second and planning from it 0.3-0.5 s, in
the process and under the GIL the Slurm and Kubernetes passes share (BENCHMARKS.md, "No-change full
pass"). The LDAP plan is a function of the desired state, the entries read and the layout alone. So
when a full pass planned nothing, the next one plans nothing too if:
- the directory holds the same entries at the same versions: the same searches, asking only for
  entryCSN, give the same digest (observe.py). OpenLDAP gives every write a new entryCSN; an entry
  added or deleted changes the set of DNs; a child added below a leaf changes its hasSubordinates;
- the desired state is equal, and so is the layout (the settings the plan reads);
- the last full read is younger than FULL_READ_EVERY. A server that stamps no entryCSN gives no
  digest, so it is always read in full; the age limit bounds what any other blind spot (a restore
  that keeps old entryCSNs, `lastmod off` switched on later) can hide.

A pass that writes forgets what was kept: its next full pass reads in full without asking for the
versions first.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from sup.domain.desired import DesiredState
from sup.targets.ldap.layout import Layout
from sup.targets.ldap.model import LdapChange, Observed

FULL_READ_EVERY = 600.0  # seconds


@dataclass(frozen=True)
class _NothingPlanned:
    versions: str
    layout: Layout
    desired: DesiredState
    read_at: float  # time.monotonic() of the full read


Key = tuple[str, str, str]  # url, bind DN, base DN: one directory as one account sees it

_KEPT: dict[Key, _NothingPlanned] = {}
_LOCK = threading.Lock()


def kept_versions(key: Key, layout: Layout) -> str | None:
    """The versions of the last full read that planned nothing, while they may still be trusted."""
    with _LOCK:
        kept = _KEPT.get(key)
    if kept is None or kept.layout != layout or time.monotonic() - kept.read_at >= FULL_READ_EVERY:
        return None
    return kept.versions


def nothing_again(key: Key, observed: Observed, layout: Layout, desired: DesiredState) -> bool:
    """True when the plan of these inputs is known to be empty."""
    if observed.versions is None:
        return False
    with _LOCK:
        kept = _KEPT.get(key)
    return (
        kept is not None
        and kept.versions == observed.versions
        and kept.layout == layout
        and time.monotonic() - kept.read_at < FULL_READ_EVERY
        and (kept.desired is desired or kept.desired == desired)
    )


def remember(
    key: Key,
    observed: Observed,
    layout: Layout,
    desired: DesiredState,
    changes: list[LdapChange],
    read_at: float,
) -> None:
    """Keep a full read's inputs when its plan is empty; forget them otherwise."""
    with _LOCK:
        if changes or observed.versions is None or observed.hollow:
            _KEPT.pop(key, None)
            return
        _KEPT[key] = _NothingPlanned(observed.versions, layout, desired, read_at)


def forget(key: Key) -> None:
    with _LOCK:
        _KEPT.pop(key, None)
