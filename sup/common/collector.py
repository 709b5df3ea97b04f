"""The cyclic garbage collector's thresholds for the `sup` process.

CPython frees almost everything by reference counting; its collector is there for reference cycles.
It runs by allocation count: with the default thresholds (700, 10, 10) a young collection every 700
container objects kept, a middle one every ten of those, and a full one, which walks every tracked
object in the process, every ten middle ones once the objects kept since the last full collection
are a quarter of those it found then.

A full pass allocates by the hundred thousand objects that live until the next pass: the desired
state, the entries and rows read, the plans. At 10,000 people a no-change pass made about 650
young, 60 middle and 1-2 full collections; they took 0.58-0.66 s of a 1.7-2.0 s pass, 0.48-0.56 s
of it the full ones (BENCHMARKS.md, "No-change full pass"). With THRESHOLDS the young generation is
collected every 50,000 objects kept and a full collection comes at most every ten million, some
twenty full passes at 10,000 people. A cycle still goes at the first young collection after it
is dropped, unless it lived through one; the young generation stays small enough that collecting it
takes milliseconds.
"""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 10)


def tune() -> None:
    """Set THRESHOLDS; call once, early, in a process that runs passes (`sup`, benchmarks)."""
    gc.set_threshold(*THRESHOLDS)
