"""An independent SCIM conformance checker from PyPI against a live `sup serve` (a real process).

scim-sanity has its own HTTP client and RFC 7643/7644 checks (no code shared with our server or
its libraries): discovery, the User and Group lifecycles (POST, GET, PUT, PATCH, DELETE, 404 after),
group member PATCH, list/filter/paging/count=0, and error handling; strict mode, every check passing.

The server runs with naming rules that accept the userNames such a checker sends (UUID-like: a
leading digit, long) and a rate limit it cannot hit (it does not back off on 429; the limit has its
own tests).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_sup, sup_env
from tests.support.server import SupServer

pytestmark = pytest.mark.postgres


@pytest.fixture
def live(postgres_template: str, new_postgres_database: Any, tmp_path: Path) -> Iterator[tuple[str, str]]:
    env = sup_env(
        SUP_DATABASE_URL=new_postgres_database(True),
        SUP_NAMING__LEADING_DIGIT_PREFIX="u",
        SUP_NAMING__OVERLONG="hash",
        SUP_SCIM__RATE_LIMIT__REQUESTS_PER_SECOND="10000",
        SUP_SCIM__RATE_LIMIT__BURST="10000",
    )
    created = run_sup("token", "create", "--name", "conformance", "--role", "scim", env=env)
    assert created.returncode == 0, created.stderr
    server = SupServer(env, tmp_path / "serve.log")
    try:
        yield f"{server.url}/scim/v2", created.stdout.strip()
    finally:
        server.stop()
    log = (tmp_path / "serve.log").read_text()
    assert "Traceback" not in log, log  # no request of the checkers made the server fail


def test_scim_sanity_probe_passes_every_check(live: tuple[str, str]) -> None:
    url, token = live
    probe = subprocess.run(
        [
            str(Path(sys.executable).parent / "scim-sanity"),
            "probe",
            url,
            "--token",
            token,
            "--i-accept-side-effects",
            "--json-output",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    report = json.loads(probe.stdout)
    results = report["results"]
    failed = [r for r in results if r["status"] not in ("pass", "skip")]
    assert failed == [], failed
    skipped = {r["name"] for r in results if r["status"] == "skip"}
    # Only the draft agent extensions SUP does not announce are skipped.
    assert all("Agent" in name for name in skipped), skipped
    assert sum(r["status"] == "pass" for r in results) >= 25
    assert probe.returncode == 0, probe.stdout[-2000:]
