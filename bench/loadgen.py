"""HTTP load from a compiled generator, so the client does not eat the server's Python CPU.

    ensure_tool() -> Path            # bench/go/loadgen.go, built once with `go build` into ~/.cache/sup/tools
    run_load(url, ...) -> LoadResult # requests/s, p50/p99 and status counts of one run

Why our own (about 100 lines of Go, standard library only) and not `hey` or `oha`: those send one URL
and one body per run, and a SCIM benchmark needs requests that differ (filters for different users,
PATCHes that change something each time: an unchanged PATCH writes nothing, POSTs of new users).
The generator cycles through `urls` and `bodies` (`{n}` in a body is the request's number). It is
compiled by the Go toolchain on first use, cached by the hash of its source; nothing lands in the
repository. What the result means:
- `requests`: answered HTTP exchanges (any status); `errors`: those with a status >= 400 plus the
  requests that got no answer (refused or reset connections).
- `seconds`: from the first request sent to the last answer received.
- `rate`: at most that many requests/s in total; a request is sent at each tick by whichever worker
  is free (a server slower than the rate lowers the rate instead of building a queue), and its latency
  is measured from when it was sent.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "go" / "loadgen.go"
TOOLS = Path(os.environ.get("SUP_BENCH_TOOLS", Path.home() / ".cache" / "sup" / "tools"))


@dataclass
class LoadResult:
    requests: int
    errors: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    statuses: dict[int, int] = field(default_factory=dict)

    def row(self) -> str:
        """`1,234 requests/s, p50 1.2 ms, p99 3.4 ms (0 errors of 24,680)`."""
        return (
            f"{self.rps:,.0f} requests/s, p50 {self.p50_ms:.1f} ms, p99 {self.p99_ms:.1f} ms "
            f"({self.errors} errors of {self.requests:,})"
        )


def _go() -> str:
    found = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(found).exists():
        raise RuntimeError("the Go toolchain is needed to build the load generator (bench/go/loadgen.go)")
    return found


def ensure_tool() -> Path:
    """The load generator's binary, built from bench/go/loadgen.go when its source is new."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    binary = TOOLS / f"sup-loadgen-{digest}" / "loadgen"
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    partial = binary.with_suffix(".partial")
    subprocess.run(  # noqa: S603 - the Go toolchain on our own source
        [_go(), "build", "-o", str(partial), str(SOURCE)],
        env={**os.environ, "GOFLAGS": "-buildvcs=false"},
        check=True,
        cwd=tempfile.gettempdir(),  # outside any Go module: standard library only
    )
    partial.rename(binary)
    return binary


def _percentile(sorted_values: Sequence[float], fraction: float) -> float:
    if not sorted_values:
        return math.nan
    index = min(len(sorted_values) - 1, max(0, math.ceil(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


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
    bodies: Sequence[str] | None = None,
) -> LoadResult:
    """Load `url` (or `urls`, cycled) for `seconds` from `concurrency` connections; see the module doc.

    `bodies`: one per request, cycled (one line each; `{n}` is replaced by the request's number);
    `body`: the same body for every request.
    """
    tool = ensure_tool()
    with tempfile.TemporaryDirectory(prefix="sup-load-") as tmp:
        url_file = Path(tmp) / "urls"
        url_file.write_text("\n".join(urls or [url]) + "\n")
        command = [
            str(tool),
            "-z",
            f"{seconds}s",
            "-c",
            str(concurrency),
            "-m",
            method,
            "-urls",
            str(url_file),
        ]
        if rate is not None:
            command += ["-q", str(rate)]
        for name, value in headers.items():
            command += ["-H", f"{name}: {value}"]
        if bodies is not None or body is not None:
            body_file = Path(tmp) / "bodies"
            lines = list(bodies) if bodies is not None else [body.decode() if body else ""]
            if any("\n" in line for line in lines):
                raise ValueError("a body must be one line")
            body_file.write_text("\n".join(lines) + "\n")
            command += ["-bodies", str(body_file)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120, check=False)  # noqa: S603
    if done.returncode != 0:
        raise RuntimeError(f"the load generator failed ({done.returncode}): {done.stderr}")
    failures = int(done.stderr.rsplit("transport-errors", 1)[1].split()[0])
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    first, last = math.inf, 0.0
    for line in done.stdout.splitlines():
        latency_text, status_text, offset_text = line.split(",")
        latency, offset, status = float(latency_text), float(offset_text), int(status_text)
        latencies.append(latency)
        statuses[status] = statuses.get(status, 0) + 1
        first, last = min(first, offset), max(last, offset + latency)
    span = last - first if latencies else seconds
    latencies.sort()
    return LoadResult(
        requests=len(latencies),
        errors=failures + sum(n for status, n in statuses.items() if status >= 400),
        seconds=span,
        rps=len(latencies) / span if span > 0 else 0.0,
        p50_ms=_percentile(latencies, 0.50) * 1000,
        p99_ms=_percentile(latencies, 0.99) * 1000,
        statuses=dict(sorted(statuses.items())),
    )
