"""Load a users/groups/slurm_accounts document into a running SUP through its API (stdlib only).

Used by scripts/demo. Objects that already exist (409) are left as they are, so re-running is safe.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def call(url: str, token: str, method: str, path: str, body: Any = None) -> int:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise SystemExit(f"{method} {path} failed with {exc.code}: {exc.read().decode()}") from exc
        return exc.code


def wait_until_up(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=1):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    raise SystemExit(f"SUP did not answer on {url} within {seconds:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--token-file", required=True, type=Path)
    parser.add_argument("document", type=Path)
    args = parser.parse_args()
    token = args.token_file.read_text().strip()
    document = json.loads(args.document.read_text())
    wait_until_up(args.url)
    created = 0
    for group in document.get("groups", []):
        created += call(args.url, token, "POST", "/api/v1/groups", group) == 201
    for user in document.get("users", []):
        created += call(args.url, token, "POST", "/api/v1/users", user) == 201
    for account in document.get("slurm_accounts", []):
        created += call(args.url, token, "POST", "/api/v1/slurm/accounts", account) == 201
    print(f"seeded {created} new objects from {args.document}", file=sys.stderr)


if __name__ == "__main__":
    main()
