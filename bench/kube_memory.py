"""What a long-running SUP process holds for the Kubernetes target, part by part (issue 27).

    .venv/bin/python bench/kube_memory.py --database-url URL --kubeconfig PATH --namespace NS [--trace]

Run by `bench/kube_bench.py --memory` in a process of its own (so the bench's own allocations do not
count), against a namespace SUP has filled. It does what `sup serve`'s reconciler does for the
Kubernetes target, in steps, and reads the process's resident memory (VmRSS, after a garbage
collection and `malloc_trim`, so freed memory is given back) after each:

1. the interpreter with SUP's modules imported;
2. the store snapshot: the desired state derived from the store (held by a pass while it runs);
3. a pass that lists and seeds the watch cache, then a no-change pass served from it: the cache
   and the memo (sup/targets/kube/memo.py) filled, as between two passes of `sup serve`;
With `--trace`, it then takes the parts away again, one at a time (the memo, the watch cache, the
store snapshot), and reads what each held with tracemalloc (started after the imports): the live
Python memory each removal frees, exact. Resident memory would not show it (freed objects leave
holes in the allocator's arenas, which later allocations reuse), and tracemalloc's own records
inflate it, so kube_bench.py runs this twice: without `--trace` for the resident memory, with it
for the parts. Prints one JSON object (MiB; VmHWM is the peak). Not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def traced_mib() -> float:
    gc.collect()
    return tracemalloc.get_traced_memory()[0] / 2**20


def rss_mib() -> tuple[float, float]:
    """(VmRSS, VmHWM) in MiB, after giving freed memory back to the system."""
    gc.collect()
    with contextlib.suppress(OSError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    fields: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--trace", action="store_true", help="the parts, with tracemalloc")
    args = parser.parse_args()
    steps: dict[str, Any] = {}

    from sup.config import Settings
    from sup.config.targets import target_context
    from sup.reconcile.planner import desired_state
    from sup.store.session import make_engine, make_sessionmaker
    from sup.targets.kube import SPEC, KubeTarget, memo, watch

    steps["interpreter and SUP's modules"] = rss_mib()[0]
    if args.trace:
        tracemalloc.start()
    settings = Settings(
        database_url=args.database_url,
        kube={"namespace": args.namespace, "kubeconfig": args.kubeconfig, "watch": True},
    )
    sessions = make_sessionmaker(make_engine(args.database_url))
    desired = desired_state(sessions, settings)
    steps["+ store snapshot (desired state)"] = rss_mib()[0]

    watch.START_AFTER = 0  # as from the second pass of `sup serve`
    timings: dict[str, float] = {}

    def one_pass(name: str, desired: Any) -> None:
        start = time.perf_counter()
        target = KubeTarget(target_context(SPEC, settings))
        try:
            changes = target.diff(desired, target.observe())
        finally:
            target.close()
        timings[name] = round(time.perf_counter() - start, 2)
        if changes:
            raise SystemExit(f"{name}: {len(changes)} changes in a namespace SUP filled")

    one_pass("seeding pass (lists)", desired)
    one_pass("pass served from the cache", desired)
    steps["+ watch cache and memo (between passes)"] = rss_mib()[0]
    entries = len(memo.VERIFIED)
    cached = sum(len(cache.versions()) for cache in watch.caches())

    result: dict[str, Any] = {"memo entries": entries, "cached objects": cached}
    if args.trace:
        held = traced_mib()
        memo.VERIFIED._entries.clear()
        without_memo = traced_mib()
        watch.reset()
        without_cache = traced_mib()
        del desired
        bare = traced_mib()
        result["live Python memory each part held (tracemalloc, MiB)"] = {
            "memo": round(held - without_memo, 1),
            "watch cache": round(without_memo - without_cache, 1),
            "store snapshot": round(without_cache - bare, 1),
            "the rest (traced since the imports)": round(bare, 1),
        }
    else:
        result["steps (VmRSS, MiB)"] = {k: round(v, 1) for k, v in steps.items()}
        result["peak VmHWM (MiB)"] = round(rss_mib()[1], 1)
        result["pass seconds"] = timings  # slower under tracemalloc: only these
    print(json.dumps(result))


if __name__ == "__main__":
    main()
