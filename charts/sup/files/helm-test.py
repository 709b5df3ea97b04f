"""`helm test`: SUP answers ready through its Service and each enabled target was reachable in the
leader's last pass; with the gateway, its Service's port accepts TCP and speaks SSH.

Run in SUP's own image by templates/tests/test-sup.yaml with the standard library only (it must not
depend on SUP's code: it checks what an operator would check with curl). Settings from the
environment: SUP_URL (SUP's Service), GATEWAY (host:port, empty without the gateway),
TIMEOUT_SECONDS (how long to wait for a replica that leads and has finished a pass).

/readyz (sup/api/health.py) says per target "configured" or "disabled", and the reconciler's view:
its role (leader, standby, starting, off) and, on the leader after a pass, each target's state.
Reachable means the pass read the target (planned, applied, partial); `error` means it could not
(connection, credentials), `refused` that a safety budget stopped it (sup_target_up is 0 for both).
Standby replicas do not run passes, so the check asks again (the Service picks a replica per
connection) until the leader answers.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from typing import Any

REACHABLE = ("planned", "applied", "partial")


def get_readyz(url: str) -> tuple[int, dict[str, Any]]:
    """/readyz's status code and body; raises OSError when SUP does not answer."""
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=10) as response:  # noqa: S310 (http:// checked in main)
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:  # 503: not ready, with the same body
        body = exc.read()
        try:
            return exc.code, json.loads(body)
        except ValueError:
            return exc.code, {"status": body.decode(errors="replace")[:200]}


def judge(body: dict[str, Any]) -> tuple[list[str], list[str]] | None:
    """(lines to print, failures) when this answer comes from a leader that has made a pass; None
    when another replica should be asked."""
    reconciler = body.get("reconciler") or {}
    if reconciler.get("role") != "leader" or not reconciler.get("last_pass_at"):
        return None
    lines: list[str] = []
    failures: list[str] = []
    database = body.get("database") or {}
    lines.append(f"SUP ready: database {database.get('state')} (revision {database.get('revision')})")
    passed = reconciler.get("targets") or {}
    age = time.time() - float(reconciler["last_pass_at"])
    for target, configured in sorted((body.get("targets") or {}).items()):
        if configured != "configured":
            lines.append(f"target {target}: disabled")
            continue
        result = passed.get(target) or {}
        state = result.get("state", "absent from the last pass")
        if state in REACHABLE:
            lines.append(f"target {target}: reachable ({state} in the last pass, {age:.0f} s ago)")
        else:
            error = result.get("error") or "no error given"
            failures.append(f"target {target} not reachable: {state}: {error}")
    return lines, failures


def check_sup(url: str, deadline: float) -> tuple[list[str], list[str]]:
    """Ask SUP until a leader that has made a pass answers ready, or the deadline passes."""
    last = "no answer yet"
    while True:
        try:
            status, body = get_readyz(url)
        except OSError as exc:
            last = f"{url}/readyz does not answer: {exc}"
        else:
            if status != 200 or body.get("status") != "ready":
                last = f"{url}/readyz says not ready (HTTP {status}): {json.dumps(body)[:500]}"
            else:
                judged = judge(body)
                if judged is not None:
                    return judged
                role = (body.get("reconciler") or {}).get("role")
                last = f"no leader with a finished pass answered (last: role {role})"
        if time.monotonic() >= deadline:
            return [], [f"SUP not ready: {last}"]
        time.sleep(2)


def check_gateway(address: str, deadline: float) -> tuple[list[str], list[str]]:
    """The gateway's Service port accepts a connection and sends an SSH banner."""
    host, _, port = address.rpartition(":")
    last = ""
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=10) as connection:
                connection.settimeout(10)
                banner = connection.recv(256).split(b"\r\n")[0].decode(errors="replace")
            if banner.startswith("SSH-"):
                return [f"gateway {address}: accepts TCP ({banner})"], []
            last = f"gateway {address} accepted TCP but sent no SSH banner ({banner!r})"
        except OSError as exc:
            last = f"gateway {address} does not accept TCP: {exc}"
        if time.monotonic() >= deadline:
            return [], [last]
        time.sleep(2)


def main() -> int:
    deadline = time.monotonic() + float(os.environ.get("TIMEOUT_SECONDS", "120"))
    url = os.environ["SUP_URL"].rstrip("/")
    if not url.startswith(("http://", "https://")):
        print(f"FAILED: SUP_URL {url!r} is not an http(s):// address")
        return 2
    lines, failures = check_sup(url, deadline)
    gateway = os.environ.get("GATEWAY", "")
    if gateway:
        more, failed = check_gateway(gateway, deadline)
        lines += more
        failures += failed
    for line in lines:
        print(line)
    for failure in failures:  # on stdout too: after what passed, in the order `helm test --logs` shows
        print(f"FAILED: {failure}")
    print("helm test: " + ("FAILED" if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
