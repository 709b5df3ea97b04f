"""The audit stream (sup/audit/ship.py): entries written through the API reach a file and a webhook as
JSON lines, in order, each once; a sink that fails keeps its cursor; secrets stay out of the logs."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from sup.audit.ship import LOCK, AuditShipper, entry_json
from sup.config import AuditOutSettings
from sup.store.audit import Actor, record
from sup.store.locks import LockTimeout, exclusive
from sup.store.models import AuditCursor, AuditEntry
from tests.conftest import ACTOR
from tests.support.cli import run_sup, sup_env
from tests.support.server import SupServer

TOKEN = "s3cret-token-value"
URL_KEY = "hush-url-key"
FIELDS = ["id", "at", "actor", "action", "resource_type", "resource_name", "before", "after", "request_id"]


def _writes(client: TestClient, headers: dict[str, str]) -> None:
    for name in ("ann", "bob"):
        assert client.post("/api/v1/users", json={"username": name}, headers=headers).status_code == 201
    client.post("/api/v1/groups", json={"name": "lab", "members": ["ann"]}, headers=headers)
    client.patch("/api/v1/groups/lab", json={"members": ["bob"]}, headers=headers)


def _entries(sessions: sessionmaker[Session]) -> list[dict[str, Any]]:
    with sessions() as session:
        return [entry_json(e) for e in session.scalars(select(AuditEntry).order_by(AuditEntry.id))]


def _cursor(sessions: sessionmaker[Session], sink: str) -> int | None:
    with sessions() as session:
        row = session.get(AuditCursor, sink)
        return None if row is None else row.last_id


def test_the_file_gets_each_api_entry_once_in_order(
    client: TestClient,
    operator: dict[str, str],
    engine: Engine,
    sessions: sessionmaker[Session],
    tmp_path: Path,
) -> None:
    _writes(client, operator)
    path = tmp_path / "audit.jsonl"
    shipper = AuditShipper(AuditOutSettings(file={"path": str(path)}), engine)
    first = shipper.ship()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    expected = _entries(sessions)
    assert len(expected) >= 5 and first.delivered == {"file": len(expected)} and not first.failed
    assert lines == expected
    assert all(list(line) == FIELDS for line in lines)
    assert [line["id"] for line in lines] == sorted(line["id"] for line in lines)
    update = next(line for line in lines if line["action"] == "update" and line["resource_type"] == "group")
    assert update["after"]["members_added"] == ["bob"] and update["after"]["members_removed"] == ["ann"]
    assert update["actor"] == "operator-token" and update["request_id"]
    at = lines[0]["at"]
    assert at.endswith("Z") and datetime.fromisoformat(at).utcoffset() is not None  # RFC 3339, UTC

    assert shipper.ship().delivered == {"file": 0}  # the cursor: nothing again
    assert [json.loads(line) for line in path.read_text().splitlines()] == expected
    client.post("/api/v1/users", json={"username": "cy"}, headers=operator)
    assert shipper.ship().delivered == {"file": 1}
    newest = json.loads(path.read_text().splitlines()[-1])
    assert (newest["action"], newest["resource_name"]) == ("create", "cy")
    assert _cursor(sessions, "file") == newest["id"]


def test_a_sink_started_at_the_end_ships_only_what_comes_after(
    client: TestClient, operator: dict[str, str], engine: Engine, tmp_path: Path
) -> None:
    _writes(client, operator)
    path = tmp_path / "audit.jsonl"
    shipper = AuditShipper(AuditOutSettings(file={"path": str(path)}, start="end"), engine)
    assert shipper.ship().delivered == {"file": 0}
    client.post("/api/v1/users", json={"username": "cy"}, headers=operator)
    assert shipper.ship().delivered == {"file": 1}
    assert json.loads(path.read_text())["resource_name"] == "cy"


class Collector:
    """A local HTTP endpoint answering each POST with the next scripted status (then the last one)."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.seen: list[tuple[int, dict[str, str], list[dict[str, Any]]]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status = collector.statuses.pop(0) if len(collector.statuses) > 1 else collector.statuses[0]
                lines = [json.loads(line) for line in body.decode().splitlines()]
                collector.seen.append((status, dict(self.headers), lines))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ingest?key={URL_KEY}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def delivered(self) -> list[dict[str, Any]]:
        return [line for status, _, lines in self.seen if 200 <= status < 300 for line in lines]


@pytest.fixture
def collector(request: pytest.FixtureRequest) -> Iterator[Collector]:
    server = Collector(list(request.param))
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


def _webhook(url: str, **extra: Any) -> AuditOutSettings:
    webhook = {"url": url, "token": TOKEN, "allow_insecure_http": True, "retry_seconds": 0.01, **extra}
    return AuditOutSettings(webhook=webhook)


@pytest.mark.parametrize("collector", [[503, 503, 200]], indirect=True)
def test_the_webhook_retries_and_delivers_every_entry_once_in_order(
    client: TestClient,
    operator: dict[str, str],
    engine: Engine,
    sessions: sessionmaker[Session],
    collector: Collector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _writes(client, operator)
    waits: list[float] = []
    shipper = AuditShipper(_webhook(collector.url, batch_size=2), engine, sleep=waits.append)
    with caplog.at_level(logging.DEBUG):
        report = shipper.ship()
    expected = _entries(sessions)
    assert report.delivered == {"webhook": len(expected)} and not report.failed
    assert collector.delivered() == expected  # each once, in order, though the first batch went 3 times
    assert [status for status, _, _ in collector.seen][:3] == [503, 503, 200]
    assert collector.seen[0][2] == collector.seen[2][2]  # the failed batch is what went again
    assert len(waits) == 2 and waits[1] >= waits[0] / 2  # backed off between the tries
    headers = collector.seen[-1][1]
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    assert headers["Content-Type"] == "application/x-ndjson"
    assert _cursor(sessions, "webhook") == expected[-1]["id"]
    assert "HTTP 503" in caplog.text
    assert TOKEN not in caplog.text and URL_KEY not in caplog.text


@pytest.mark.parametrize("collector", [[500]], indirect=True)
def test_a_webhook_that_keeps_failing_never_moves_its_cursor(
    client: TestClient,
    operator: dict[str, str],
    engine: Engine,
    sessions: sessionmaker[Session],
    collector: Collector,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _writes(client, operator)
    path = tmp_path / "audit.jsonl"
    settings = _webhook(collector.url, attempts=3).model_copy(
        update={"file": AuditOutSettings(file={"path": str(path)}).file}
    )
    shipper = AuditShipper(settings, engine, sleep=lambda _: None)
    with caplog.at_level(logging.DEBUG):
        for _ in range(2):
            report = shipper.ship()
            assert report.delivered["webhook"] == 0 and "HTTP 500" in report.failed["webhook"]
            assert _cursor(sessions, "webhook") == 0
    assert len(collector.seen) == 6 and not collector.delivered()
    # The file sink goes on regardless.
    assert len(path.read_text().splitlines()) == len(_entries(sessions)) == _count_after(sessions, 0)
    assert TOKEN not in caplog.text and URL_KEY not in caplog.text
    assert all(TOKEN not in p and URL_KEY not in p for p in report.failed.values())


def _count_after(sessions: sessionmaker[Session], cursor: int) -> int:
    with sessions() as session:
        return len(session.scalars(select(AuditEntry.id).where(AuditEntry.id > cursor)).all())


@pytest.mark.parametrize("collector", [[401, 200]], indirect=True)
def test_a_refusal_is_an_error_in_the_log_and_drops_nothing(
    client: TestClient,
    operator: dict[str, str],
    engine: Engine,
    sessions: sessionmaker[Session],
    collector: Collector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _writes(client, operator)
    shipper = AuditShipper(_webhook(collector.url, attempts=1), engine)
    with caplog.at_level(logging.WARNING):
        refused = shipper.ship()
    assert "HTTP 401" in refused.failed["webhook"] and _cursor(sessions, "webhook") == 0
    assert any(r.levelno == logging.ERROR and "HTTP 401" in r.getMessage() for r in caplog.records)
    assert shipper.ship().delivered == {"webhook": len(_entries(sessions))}  # fixed: all of it, once
    assert collector.delivered() == _entries(sessions)


def test_one_process_ships_at_a_time(engine: Engine, tmp_path: Path) -> None:
    shipper = AuditShipper(AuditOutSettings(file={"path": str(tmp_path / "a.jsonl")}), engine)
    with exclusive(engine, LOCK), pytest.raises(LockTimeout):
        shipper.ship()


def test_the_webhook_is_https_unless_allowed_and_the_token_never_shows() -> None:
    with pytest.raises(ValidationError) as refused:
        AuditOutSettings(webhook={"url": "http://siem.example.org/in", "token": TOKEN})
    assert "plain http" in str(refused.value) and TOKEN not in str(refused.value)
    settings = AuditOutSettings(webhook={"url": "https://siem.example.org/in", "token": TOKEN})
    assert TOKEN not in repr(settings) and TOKEN not in settings.model_dump_json()
    with pytest.raises(ValidationError, match="needs a sink"):
        AuditOutSettings()


@pytest.mark.parametrize(
    "database_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)  # PostgreSQL only: SQLite has one writer at a time, so commits come in id order
def test_an_entry_that_commits_late_is_not_skipped(
    database_url: str, engine: Engine, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    """PostgreSQL: ids in order are not commits in order. An entry whose transaction is still open
    when a newer one commits is shipped once it commits, before the newer one."""
    assert database_url.startswith("postgresql")
    actor = Actor(name="test", role="admin")
    path = tmp_path / "audit.jsonl"
    shipper = AuditShipper(AuditOutSettings(file={"path": str(path)}), engine)
    slow = sessions()
    record(slow, actor, "create", "user", "slow")
    slow.flush()  # takes its id now, commits later
    with sessions.begin() as session:
        record(session, actor, "create", "user", "fast")
    assert shipper.ship().delivered == {"file": 0}  # "fast" waits behind the open one
    slow.commit()
    slow.close()
    assert shipper.ship().delivered == {"file": 2}
    names = [json.loads(line)["resource_name"] for line in path.read_text().splitlines()]
    assert names == ["slow", "fast"]
    rolled_back = sessions()
    record(rolled_back, actor, "create", "user", "never")
    rolled_back.flush()
    rolled_back.rollback()
    rolled_back.close()
    with sessions.begin() as session:
        record(session, actor, "create", "user", "after-the-gap")
    assert shipper.ship().delivered == {"file": 1}  # a rolled-back id is passed over


def test_sup_audit_ship_once_and_tail(
    store_url: str, store_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    with store_sessions.begin() as session:
        for name in ("ann", "bob", "cy"):
            record(session, ACTOR, "create", "user", name, after={"username": name})
    path = tmp_path / "audit.jsonl"
    env = sup_env(SUP_DATABASE_URL=store_url, SUP_AUDIT_OUT__FILE__PATH=str(path))
    shipped = run_sup("audit", "ship", "--once", env=env)
    assert shipped.returncode == 0, shipped.stderr
    lines = path.read_text().splitlines()
    assert [json.loads(line)["resource_name"] for line in lines] == ["ann", "bob", "cy"]
    assert "file: 3 entries shipped" in shipped.stderr
    assert run_sup("audit", "ship", "--once", env=env).stderr.strip() == "file: 0 entries shipped"
    tail = run_sup("audit", "tail", "-n", "2", env=env)
    assert tail.returncode == 0, tail.stderr
    assert tail.stdout.splitlines() == lines[-2:]
    off = run_sup("audit", "ship", "--once", env=sup_env(SUP_DATABASE_URL=store_url))
    assert off.returncode == 6 and "not configured" in off.stderr


def test_sup_serve_ships_as_it_serves(store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    env = sup_env(
        SUP_DATABASE_URL=store_url,
        SUP_AUDIT_OUT__FILE__PATH=str(path),
        SUP_AUDIT_OUT__INTERVAL_SECONDS="0.2",
    )
    token = run_sup("token", "create", "--name", "ops", "--role", "operator", env=env).stdout.strip()
    server = SupServer(env, tmp_path / "serve.log")
    try:
        headers = {"Authorization": f"Bearer {token}"}
        response = httpx.post(f"{server.url}/api/v1/users", json={"username": "kim"}, headers=headers)
        assert response.status_code == 201, response.text
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "kim" not in (path.read_text() if path.exists() else ""):
            time.sleep(0.1)
    finally:
        server.stop()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(e["action"], e["resource_type"], e["resource_name"]) for e in lines] == [
        ("create", "token", "ops"),
        ("create", "user", "kim"),
    ]
