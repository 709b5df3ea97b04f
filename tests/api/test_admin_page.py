"""The admin page (/admin) in a real headless browser against a real `sup serve`: it lists the users
with their per-target status, the current plan, who is connected through the SSH gateway and the
audit log; API values are shown as text, never
run as markup; a bad token shows the API's error; the page is locked down by its headers."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from sup.store import migrate
from tests.support.browser import dump_dom
from tests.support.cli import run_sup, sup_env
from tests.support.server import SupServer

HOSTILE = '<img src=x onerror="document.title=1">'
SINCE = datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


class _Tables(HTMLParser):
    """Text of each cell per table id, and every element seen (to find injected markup)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.headers: dict[str, list[str]] = {}  # table id -> the text of its header cells
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.by_id: dict[str, str] = {}
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._id_stack: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.elements.append((tag, attributes))
        self._id_stack.append((tag, attributes.get("id")))
        if tag == "table":
            self._table = attributes.get("id")
            self.tables[self._table or ""] = []
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        while self._id_stack:
            opened, _ = self._id_stack.pop()
            if opened == tag:
                break
        if tag == "th" and self._table is not None and self._cell is not None:
            self.headers.setdefault(self._table, []).append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "td" and self._row is not None and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            if self._row:
                self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        for _, element_id in self._id_stack:
            if element_id:
                self.by_id[element_id] = self.by_id.get(element_id, "") + data


def _load(chromium: str, url: str) -> _Tables:
    parser = _Tables()
    parser.feed(dump_dom(chromium, url))
    return parser


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[SupServer, str]]:
    url = f"sqlite:///{tmp_path / 'sup.db'}"
    migrate.upgrade(url)
    env = sup_env(SUP_DATABASE_URL=url)
    token = run_sup("token", "create", "--name", "web", "--role", "viewer", env=env).stdout.strip()
    admin = run_sup("token", "create", "--name", "seed", "--role", "admin", env=env).stdout.strip()
    server = SupServer(env, tmp_path / "serve.log")
    headers = {"Authorization": f"Bearer {admin}"}
    for body in ({"username": "kim", "display_name": HOSTILE}, {"username": "saul", "display_name": "Saul"}):
        httpx.post(f"{server.url}/api/v1/users", json=body, headers=headers, timeout=30).raise_for_status()
    # a gateway replica's heartbeat: kim connected to her own pod (admin tokens may post it too)
    session = {"kind": "user", "name": "kim", "username": "kim", "since": SINCE, "source": "192.0.2.7:50022"}
    beat = {"gateway": "gw-a", "sessions": [session], "busy": []}
    httpx.post(
        f"{server.url}/api/v1/gateway/heartbeat", json=beat, headers=headers, timeout=30
    ).raise_for_status()
    yield server, token
    server.stop()


def test_the_admin_page_shows_users_status_plan_and_audit(
    chromium: str, served: tuple[SupServer, str]
) -> None:
    server, token = served
    page = _load(chromium, f"{server.url}/admin#token={token}")
    assert page.by_id.get("error", "") == "", page.by_id.get("error")
    assert page.by_id["status"].startswith("loaded ")

    users = {row[0]: row for row in page.tables["users"]}
    assert set(users) == {"kim", "saul"}
    # username, name, uid, state, then a column per registered target: none is configured here.
    assert page.headers["users"] == ["username", "name", "uid", "state", "ldap", "slurm", "kube"]
    assert users["saul"][1:] == ["Saul", "10001", "active", "disabled", "disabled", "disabled"]
    assert users["kim"][1] == HOSTILE  # shown as text ...
    assert not any(tag == "img" for tag, _ in page.elements)  # ... never made into an element
    assert [row[:2] for row in page.tables["plan-targets"]] == [
        ["ldap", "disabled"], ["slurm", "disabled"], ["kube", "disabled"],
    ]  # fmt: skip
    assert page.tables["sessions"] == [["kim", "user/kim", SINCE, "192.0.2.7:50022", "gw-a"]]
    assert page.by_id["session-count"] == "(1)"
    audit = page.tables["audit"]
    assert {(row[1], row[2], row[3], row[4]) for row in audit} >= {
        ("seed", "create", "user", "kim"), ("seed", "create", "user", "saul"),
    }  # fmt: skip


def test_a_bad_token_shows_the_api_error(chromium: str, served: tuple[SupServer, str]) -> None:
    server, _ = served
    page = _load(chromium, f"{server.url}/admin#token=sup_not_a_real_token_at_all_000000")
    assert "401" in page.by_id["error"] and "not valid" in page.by_id["error"]
    assert page.tables["users"] == [] and page.by_id["status"] == "failed"


def test_the_page_is_locked_down(served: tuple[SupServer, str]) -> None:
    server, _ = served
    for path in ("/admin", "/admin/app.js", "/admin/app.css"):
        response = httpx.get(f"{server.url}{path}", timeout=10)
        assert response.status_code == 200
        policy = response.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe-inline" not in policy
        assert response.headers["x-content-type-options"] == "nosniff"
    assert "/admin" not in httpx.get(f"{server.url}/openapi.json", timeout=10).json()["paths"]
