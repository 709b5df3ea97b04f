"""STAND-IN for bench/loadgen.py until it is merged: delete this file then (scale_bench.py uses
bench.loadgen when it exists and says in its table when it fell back to this).

The same interface as bench/loadgen.py (LoadResult, run_load), but the client is Python threads with
httpx in this process: it eats CPU the server would otherwise have, so its requests/s are a floor,
not comparable with the compiled generator's. Only here so the scale benchmark's load row can be
developed and checked before the merge.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path

import httpx

from bench.fullstack import percentile


@dataclass
class LoadResult:
    requests: int
    errors: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    statuses: dict[int, int] = field(default_factory=dict)


def ensure_tool() -> Path:
    """Nothing to install: the stand-in is this module."""
    return Path(__file__)


def run_load(
    url: str,
    *,
    method: str = "GET",
    headers: Mapping[str, str] = {},
    body: bytes | None = None,
    seconds: float = 10.0,
    concurrency: int = 16,
    rate: float | None = None,
    urls: Sequence[str] | None = None,
) -> LoadResult:
    targets = list(urls) if urls else [url]
    ticket = count()
    lock = threading.Lock()
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    errors = 0
    started = time.perf_counter()
    deadline = started + seconds

    def client() -> None:
        nonlocal errors
        with httpx.Client(headers=dict(headers), timeout=30) as http:
            while True:
                n = next(ticket)
                if rate is not None:  # open model: request n is due at n / rate
                    due = started + n / rate
                    time.sleep(max(0.0, due - time.perf_counter()))
                if time.perf_counter() >= deadline:
                    return
                sent = time.perf_counter()
                try:
                    status = http.request(method, targets[n % len(targets)], content=body).status_code
                except httpx.HTTPError:
                    status = 0
                took = time.perf_counter() - sent
                with lock:
                    latencies.append(took)
                    statuses[status] += 1
                    errors += status == 0 or status >= 400

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return LoadResult(
        requests=len(latencies),
        errors=errors,
        seconds=elapsed,
        rps=len(latencies) / elapsed,
        p50_ms=percentile(latencies, 0.5) * 1000 if latencies else 0.0,
        p99_ms=percentile(latencies, 0.99) * 1000 if latencies else 0.0,
        statuses=dict(statuses),
    )
