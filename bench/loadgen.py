"""HTTP load from a compiled generator (`hey`), so the client does not eat the server's Python CPU.

    ensure_tool() -> Path            # hey, installed once with `go install` into ~/.cache/sup/tools
    run_load(url, ...) -> LoadResult # requests/s, p50/p99 and status counts of one run

`hey` is pinned (HEY_VERSION) and installed by the Go toolchain through its configured module proxy
(GOBIN set to the cache; nothing lands in the repository). It sends one URL, one method and one body
per process, so `urls` is served by one hey process per URL, the concurrency (and the rate) split
between them; the figures are merged from each request's latency (hey's CSV output). What the result
means:
- `requests`: completed HTTP exchanges (any status); `errors`: those with a status >= 400. Transport
  errors (refused or reset connections) are not in hey's CSV and are not counted.
- `seconds`: from the first request sent to the last answer received (over all processes).
- `rate`: total requests/s over all hey workers (hey paces each worker at rate/concurrency, closed
  loop: a slow answer delays that worker's next request).
"""

from __future__ import annotations

import csv
import io
import math
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HEY_MODULE = "github.com/rakyll/hey"
HEY_VERSION = "v0.1.4"
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
        """`1,234 requests/s, p50 1.2 ms, p99 3.4 ms (0 errors)`."""
        return (
            f"{self.rps:,.0f} requests/s, p50 {self.p50_ms:.1f} ms, p99 {self.p99_ms:.1f} ms "
            f"({self.errors} errors of {self.requests})"
        )


def _go() -> str:
    found = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(found).exists():
        raise RuntimeError("the Go toolchain is needed to install the load generator (hey)")
    return found


def ensure_tool() -> Path:
    """The pinned `hey` binary, installed with `go install` on first use."""
    target = TOOLS / f"hey-{HEY_VERSION}"
    binary = target / "hey"
    if binary.exists():
        return binary
    target.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOBIN": str(target), "GOFLAGS": "-buildvcs=false"}
    subprocess.run(  # noqa: S603 - a fixed module and version
        [_go(), "install", f"{HEY_MODULE}@{HEY_VERSION}"],
        env=env,
        check=True,
        cwd=tempfile.gettempdir(),  # outside any Go module
    )
    return binary


def _percentile(sorted_values: Sequence[float], fraction: float) -> float:
    if not sorted_values:
        return math.nan
    index = min(len(sorted_values) - 1, max(0, math.ceil(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def _command(
    tool: Path,
    url: str,
    method: str,
    headers: Mapping[str, str],
    body: Path | None,
    seconds: float,
    concurrency: int,
    rate: float | None,
) -> list[str]:
    command = [str(tool), "-z", f"{seconds}s", "-c", str(concurrency), "-m", method, "-o", "csv"]
    if rate is not None:
        command += ["-q", f"{rate / concurrency:.4f}"]
    for name, value in headers.items():
        if name.lower() == "content-type":
            command += ["-T", value]
        else:
            command += ["-H", f"{name}: {value}"]
    if body is not None:
        command += ["-D", str(body)]
    return [*command, url]


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
    """Load `url` (or each of `urls`, one hey process each) for `seconds`; see the module doc."""
    tool = ensure_tool()
    targets = list(urls) if urls else [url]
    processes = min(len(targets), concurrency)
    targets = targets[:processes]
    shares = [concurrency // processes + (1 if i < concurrency % processes else 0) for i in range(processes)]
    with tempfile.TemporaryDirectory(prefix="sup-load-") as tmp:
        body_file: Path | None = None
        if body is not None:
            body_file = Path(tmp) / "body"
            body_file.write_bytes(body)
        running = []
        for index, (target, share) in enumerate(zip(targets, shares, strict=True)):
            share_rate = None if rate is None else rate * share / concurrency
            out = (Path(tmp) / f"out{index}.csv").open("w+")
            command = _command(tool, target, method, headers, body_file, seconds, share, share_rate)
            running.append((subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE), out))  # noqa: S603
        started = time.monotonic()
        latencies: list[float] = []
        statuses: dict[int, int] = {}
        first, last = math.inf, 0.0
        for process, out in running:
            _, stderr = process.communicate(timeout=seconds + 120)
            if process.returncode != 0:
                raise RuntimeError(f"hey failed ({process.returncode}): {stderr.decode(errors='replace')}")
            out.seek(0)
            for record in csv.DictReader(io.StringIO(out.read())):
                latency, offset = float(record["response-time"]), float(record["offset"])
                status = int(record["status-code"])
                latencies.append(latency)
                statuses[status] = statuses.get(status, 0) + 1
                first = min(first, offset)
                last = max(last, offset + latency)
            out.close()
    span = last - first if latencies else time.monotonic() - started
    latencies.sort()
    return LoadResult(
        requests=len(latencies),
        errors=sum(n for status, n in statuses.items() if status >= 400),
        seconds=span,
        rps=len(latencies) / span if span > 0 else 0.0,
        p50_ms=_percentile(latencies, 0.50) * 1000,
        p99_ms=_percentile(latencies, 0.99) * 1000,
        statuses=dict(sorted(statuses.items())),
    )
