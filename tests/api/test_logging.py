"""Structured logs (issue 10): `log.format` json gives one JSON object per line, and every record
logged while a request is handled carries that request's id, the same one the client sees in
X-Request-ID and in problem+json bodies."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from sup import logs
from sup.app import create_app
from sup.config import Settings


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    yield stream
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def _configure(fmt: str, stream: io.StringIO) -> None:
    logs.configure(fmt, "info")  # type: ignore[arg-type]
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)


def test_json_lines_carry_the_request_id(
    settings: Settings, engine: Engine, admin: dict[str, str], captured: io.StringIO
) -> None:
    _configure("json", captured)
    app = create_app(settings, engine)

    @app.get("/api/v1/test-boom")
    def boom() -> None:
        logging.getLogger("sup.test").warning("about to fail")
        raise RuntimeError("boom")

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/api/v1/test-boom", headers={**admin, "X-Request-ID": "req-123"})
        assert response.status_code == 500 and response.json()["request_id"] == "req-123"
        assert response.headers["x-request-id"] == "req-123"
        mine = client.get("/api/v1/users", headers=admin)
    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    warning = next(e for e in lines if e["message"] == "about to fail")
    assert warning["request_id"] == "req-123" and warning["level"] == "WARNING"
    assert warning["logger"] == "sup.test" and warning["time"].endswith("+00:00")
    failure = next(e for e in lines if "unhandled error" in e["message"])
    assert failure["request_id"] == "req-123" and "RuntimeError: boom" in failure["exception"]
    assert mine.headers["x-request-id"] != "req-123"
    # Outside a request there is no id (the reconciler's records), and nothing stale leaks in.
    logging.getLogger("sup.test").info("between requests")
    last = json.loads(captured.getvalue().splitlines()[-1])
    assert last["message"] == "between requests" and "request_id" not in last


def test_text_format_and_redaction(captured: io.StringIO) -> None:
    _configure("text", captured)
    logging.getLogger("sup.test").error("bind to ldap://admin:hunter2-long@ldap failed; Bearer abcdefghijkl")
    line = captured.getvalue()
    assert " ERROR sup.test [-]: bind to ldap://admin:[REDACTED]@ldap failed; Bearer [REDACTED]" in line
    assert "hunter2" not in line and "abcdefghijkl" not in line


def test_log_format_is_a_setting() -> None:
    assert Settings().log.format == "json"
    assert Settings(log={"format": "text"}).log.format == "text"
    with pytest.raises(ValueError, match="json"):
        Settings(log={"format": "xml"})
