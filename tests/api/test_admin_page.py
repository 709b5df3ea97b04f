"""The admin page (/admin) in a real headless chromium, driven through the DevTools protocol
(tests/support/cdp.py), against a real `sup serve`: the list with server-side search, filters and
paging; a person's identity, keys, groups, status, login pods, sessions and audit; the plan only when
asked for; suspend, reactivate, remove a key and reconcile now, each confirmed, done by the API and
audited; a viewer's write refused with the API's 403 shown as text; API values shown as text, never
run as markup; the page locked down by its headers.

One server and one browser for the module (the tests run in file order; each write test uses a user
the others do not look at)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from sup.store import migrate
from tests.support import keys
from tests.support.cdp import Browser
from tests.support.cli import run_sup, sup_env
from tests.support.server import SupServer

HOSTILE = '<img src=x onerror="document.title=1">'
SINCE = datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
KIM_KEYS = [keys.ed25519_key("kim@laptop"), keys.ed25519_key("kim@desk")]


@dataclass
class Site:
    server: SupServer
    viewer: str
    operator: str
    admin: str

    def get(self, path: str, **params: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.admin}"}
        response = httpx.get(f"{self.server.url}{path}", params=params, headers=headers, timeout=30)
        response.raise_for_status()
        return response

    def page(self, token: str, size: int = 50) -> str:
        return f"{self.server.url}/admin#token={token}&size={size}"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """kim (a hostile display name, two keys, physics, connected through the gateway), lee (chem),
    mike (suspended), saul (physics)."""
    tmp_path = tmp_path_factory.mktemp("admin-page")
    url = f"sqlite:///{tmp_path / 'sup.db'}"
    migrate.upgrade(url)
    env = sup_env(SUP_DATABASE_URL=url)
    tokens = {
        role: run_sup("token", "create", "--name", name, "--role", role, env=env).stdout.strip()
        for role, name in (("viewer", "web"), ("operator", "ops"), ("admin", "seed"))
    }
    server = SupServer(env, tmp_path / "serve.log")
    headers = {"Authorization": f"Bearer {tokens['admin']}"}
    try:
        for group in ("physics", "chem"):
            httpx.post(
                f"{server.url}/api/v1/groups", json={"name": group}, headers=headers, timeout=30
            ).raise_for_status()
        for body in (
            {"username": "kim", "display_name": HOSTILE, "ssh_public_keys": KIM_KEYS, "groups": ["physics"]},
            {"username": "lee", "email": "lee@chem-lab.example", "groups": ["chem"]},
            {"username": "mike", "display_name": "Mike Ehrmantraut", "active": False},
            {"username": "saul", "display_name": "Saul Goodman", "groups": ["physics"]},
        ):
            httpx.post(
                f"{server.url}/api/v1/users", json=body, headers=headers, timeout=30
            ).raise_for_status()
        # a gateway replica's heartbeat: kim connected to her own pod (admin tokens may post it too)
        session = {
            "kind": "user",
            "name": "kim",
            "username": "kim",
            "since": SINCE,
            "source": "192.0.2.7:50022",
        }
        beat = {"gateway": "gw-a", "sessions": [session], "busy": []}
        httpx.post(
            f"{server.url}/api/v1/gateway/heartbeat", json=beat, headers=headers, timeout=30
        ).raise_for_status()
        yield Site(server, tokens["viewer"], tokens["operator"], tokens["admin"])
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[Browser]:
    with Browser(chromium) as driver:
        yield driver


def _open(browser: Browser, url: str) -> None:
    """Load the page afresh and wait for its first list."""
    browser.navigate("about:blank")
    browser.navigate(url)
    browser.wait_for("document.getElementById('status').textContent !== 'loading'")
    assert browser.text("#error") == "", browser.text("#error")


def _usernames(browser: Browser) -> list[str]:
    return [row[0] for row in browser.table("#users")]


def _wait_users(browser: Browser, expected: list[str]) -> None:
    names = "Array.from(document.querySelectorAll('#users tbody tr')).map((tr) => tr.cells[0].textContent)"
    check = f"JSON.stringify({names}) === {json.dumps(json.dumps(expected, separators=(',', ':')))}"
    try:
        browser.wait_for(check, timeout=10)
    except AssertionError:
        raise AssertionError(
            f"users {_usernames(browser)}, wanted {expected}; {browser.text('#error')}"
        ) from None


def _fetched(browser: Browser) -> list[str]:
    """The API paths the page has fetched since it loaded."""
    names = browser.evaluate("performance.getEntriesByType('resource').map((e) => e.name)")
    return [httpx.URL(name).path for name in names if "/api/v1/" in name]


def _open_person(browser: Browser, username: str) -> None:
    browser.evaluate(
        "Array.from(document.querySelectorAll('#users button.open'))"
        f".find((b) => b.textContent === {json.dumps(username)}).click()"
    )
    browser.wait_for(
        f"!document.getElementById('person').hidden && "
        f"document.getElementById('person-name').textContent === {json.dumps(username)} && "
        "document.querySelectorAll('#person-status tbody tr').length > 0"
    )


def _confirm(browser: Browser, button: str, question: str) -> None:
    browser.click(button)
    browser.wait_for("!document.getElementById('confirm').hidden")
    assert browser.text("#confirm-text") == question
    browser.click("#confirm-yes")


def _wait_result(browser: Browser, text: str) -> str:
    browser.wait_for(
        f"document.getElementById('action-result').textContent.includes({json.dumps(text)}) || "
        "document.getElementById('error').textContent !== ''"
    )
    assert browser.text("#error") == "", browser.text("#error")
    return browser.text("#action-result")


def test_the_list_pages_searches_and_filters_on_the_server(site: Site, browser: Browser) -> None:
    _open(browser, site.page(site.viewer, size=2))
    _wait_users(browser, ["kim", "lee"])
    assert browser.text("#page-info") == "1-2 of 4" and browser.text("#user-count") == "(4)"
    headers = browser.evaluate(
        "Array.from(document.querySelectorAll('#users th')).map((th) => th.textContent)"
    )
    # username ... source, then a column per registered target: none is configured here
    assert headers == ["username", "name", "e-mail", "uid", "state", "source", "ldap", "slurm", "kube"]
    kim = browser.table("#users")[0]
    assert kim[1] == HOSTILE and kim[4:] == ["active", "api", "disabled", "disabled", "disabled"]
    # shown as text, never made into an element (nor run: the title stays)
    assert browser.evaluate("document.querySelectorAll('img').length") == 0
    assert browser.evaluate("document.title") == "SUP admin"
    # one list request and one status request for the page: never one per user; no plan
    browser.wait_for("document.querySelectorAll('#audit tbody tr').length > 0")
    assert sorted(_fetched(browser)) == [
        "/api/v1/audit", "/api/v1/status/users", "/api/v1/users", "/api/v1/whoami",
    ]  # fmt: skip
    assert browser.text("#whoami") == "web (viewer)"

    browser.click("#next")
    _wait_users(browser, ["mike", "saul"])
    assert browser.text("#page-info") == "3-4 of 4"
    assert browser.evaluate("document.getElementById('next').disabled") is True
    browser.click("#prev")
    _wait_users(browser, ["kim", "lee"])

    browser.fill("#q", "GOODMAN")  # display name, any case
    browser.click("#search button[type=submit]")
    _wait_users(browser, ["saul"])
    browser.fill("#q", "chem-lab")  # e-mail
    browser.click("#search button[type=submit]")
    _wait_users(browser, ["lee"])
    browser.fill("#q", "")
    browser.fill("#f-status", "false")  # a change of status searches at once
    _wait_users(browser, ["mike"])
    assert browser.table("#users")[0][4] == "suspended"
    browser.fill("#f-status", "")
    browser.fill("#f-group", "physics")
    browser.click("#search button[type=submit]")
    _wait_users(browser, ["kim", "saul"])
    browser.fill("#f-group", "")
    browser.fill("#f-source", "scim:corp")
    browser.click("#search button[type=submit]")
    _wait_users(browser, [])
    assert browser.text("#page-info") == "no users match"


def test_a_person_shows_identity_keys_groups_status_login_and_audit(site: Site, browser: Browser) -> None:
    _open(browser, site.page(site.viewer))
    _wait_users(browser, ["kim", "lee", "mike", "saul"])
    _open_person(browser, "kim")
    identity = {row[0]: row[1] for row in browser.table("#identity")}
    assert identity["display name"] == HOSTILE and identity["uid"] == "10000"
    assert identity["state"] == "active" and identity["home"] == "/home/kim"
    assert browser.evaluate("document.querySelectorAll('img').length") == 0
    fingerprints = [k["fingerprint"] for k in site.get("/api/v1/users/kim/ssh-keys").json()]
    assert [row[:3] for row in browser.table("#keys")] == [
        [fingerprints[0], "admin", "kim@laptop"], [fingerprints[1], "admin", "kim@desk"],
    ]  # fmt: skip
    assert browser.text("#groups") == "physics"
    assert [row[:2] for row in browser.table("#person-status")] == [
        ["ldap", "disabled"], ["slurm", "disabled"], ["kube", "disabled"],
    ]  # fmt: skip
    assert browser.text("#login-reason") == "no login pod: no_login_pod"  # no Kubernetes target here
    assert browser.table("#login-pods") == []
    assert browser.table("#person-sessions") == [["user/kim", SINCE, "192.0.2.7:50022", "gw-a"]]
    assert ["seed", "create", "user"] in [row[1:] for row in browser.table("#person-audit")]


def test_the_plan_is_made_only_on_demand_and_says_when(site: Site, browser: Browser) -> None:
    _open(browser, site.page(site.viewer))
    assert browser.evaluate("document.getElementById('plan-targets').hidden") is True
    assert browser.table("#plan-targets") == [] and browser.text("#plan-time") == ""
    before = datetime.datetime.now(datetime.UTC)
    browser.click("#show-plan")
    browser.wait_for("document.getElementById('plan-time').textContent.startsWith('made at 2')")
    made = datetime.datetime.fromisoformat(browser.text("#plan-time").removeprefix("made at "))
    assert before - datetime.timedelta(seconds=1) <= made <= datetime.datetime.now(datetime.UTC)
    assert [row[:2] for row in browser.table("#plan-targets")] == [
        ["ldap", "disabled"], ["slurm", "disabled"], ["kube", "disabled"],
    ]  # fmt: skip
    assert "/api/v1/plan" in _fetched(browser)
    browser.click("#show-sessions")  # the gateway's sessions, on demand too
    browser.wait_for("document.getElementById('session-count').textContent === '(1)'")
    assert browser.table("#sessions") == [["kim", "user/kim", SINCE, "192.0.2.7:50022", "gw-a"]]


def test_suspend_then_reactivate_is_done_by_the_api_and_audited(site: Site, browser: Browser) -> None:
    _open(browser, site.page(site.operator))
    _wait_users(browser, ["kim", "lee", "mike", "saul"])
    _open_person(browser, "lee")
    assert browser.evaluate("document.getElementById('reactivate').hidden") is True
    browser.click("#suspend")
    browser.click("#confirm-no")  # cancelled: nothing happens
    assert site.get("/api/v1/users/lee").json()["active"] is True

    _confirm(browser, "#suspend", "Suspend lee?")
    assert _wait_result(browser, "lee suspended") == "lee suspended"
    assert site.get("/api/v1/users/lee").json()["active"] is False
    browser.wait_for("document.getElementById('suspend').hidden")
    # the list is read again
    browser.wait_for(
        "document.querySelector('#users tbody tr:nth-child(2)').cells[4].textContent === 'suspended'"
    )

    _confirm(browser, "#reactivate", "Reactivate lee?")
    _wait_result(browser, "lee reactivated")
    assert site.get("/api/v1/users/lee").json()["active"] is True
    updates = site.get("/api/v1/audit", resource_name="lee", action="update").json()["items"]
    assert [(e["actor"], e["before"]["active"], e["after"]["active"]) for e in updates[:2]] == [
        ("ops", False, True), ("ops", True, False),
    ]  # fmt: skip
    browser.wait_for("document.querySelectorAll('#person-audit tbody tr').length >= 3")
    assert browser.table("#person-audit")[0][1:3] == ["ops", "update"]


def test_remove_a_key(site: Site, browser: Browser) -> None:
    _open(browser, site.page(site.operator))
    _wait_users(browser, ["kim", "lee", "mike", "saul"])
    _open_person(browser, "kim")
    laptop, desk = site.get("/api/v1/users/kim/ssh-keys").json()
    _confirm(
        browser, "#keys tbody tr:first-child button.remove-key", f"Remove key {laptop['fingerprint']} of kim?"
    )
    _wait_result(browser, "removed")
    assert site.get("/api/v1/users/kim/ssh-keys").json() == [desk]
    browser.wait_for("document.querySelectorAll('#keys tbody tr').length === 1")
    assert browser.table("#keys")[0][0] == desk["fingerprint"]
    entry = site.get("/api/v1/audit", resource_name="kim", action="update").json()["items"][0]
    assert entry["actor"] == "ops" and entry["after"]["ssh_public_keys"] == [desk["key"]]


def test_reconcile_now(site: Site, browser: Browser) -> None:
    _open(browser, site.page(site.operator))
    _wait_users(browser, ["kim", "lee", "mike", "saul"])
    _open_person(browser, "saul")
    before = datetime.datetime.now(datetime.UTC)
    _confirm(browser, "#reconcile", "Run a reconcile pass now (every enabled target, every user)?")
    result = _wait_result(browser, "done")
    # the POST's answer: a pass that began after the click, and each target's verdict
    assert result.endswith("done: 0 changes (ldap: disabled, slurm: disabled, kube: disabled)"), result
    started = datetime.datetime.fromisoformat(result.split()[3])
    assert before - datetime.timedelta(seconds=1) <= started <= datetime.datetime.now(datetime.UTC)


def test_a_viewer_sees_no_write_buttons_and_the_api_refuses_anyway(site: Site, browser: Browser) -> None:
    _open(browser, site.page(site.viewer))
    _wait_users(browser, ["kim", "lee", "mike", "saul"])
    _open_person(browser, "saul")
    browser.wait_for("document.body.classList.contains('read-only')")
    visible = (
        "(selector) => Array.from(document.querySelectorAll(selector))"
        ".filter((el) => el.getClientRects().length)"
    )
    assert browser.evaluate(f"({visible})('button.write').length") == 0
    assert browser.evaluate(f"({visible})('button.open').length") == 4  # reading is all there
    # The API is the check: with the buttons shown anyway, its 403 is shown as text.
    browser.evaluate("document.body.classList.remove('read-only')")
    _confirm(browser, "#suspend", "Suspend saul?")
    browser.wait_for("document.getElementById('error').textContent !== ''")
    assert browser.text("#error").startswith("PATCH /api/v1/users/saul: 403 ")
    assert "this needs operator" in browser.text("#error")
    assert browser.text("#action-result") == ""
    assert site.get("/api/v1/users/saul").json()["active"] is True


def test_a_bad_token_shows_the_api_error(site: Site, browser: Browser) -> None:
    browser.navigate("about:blank")
    browser.navigate(site.page("sup_not_a_real_token_at_all_000000"))
    browser.wait_for("document.getElementById('status').textContent === 'failed'")
    error = browser.text("#error")
    assert "401" in error and "not valid" in error
    assert browser.table("#users") == []


def test_the_page_is_locked_down(site: Site) -> None:
    for path in ("/admin", "/admin/app.js", "/admin/app.css"):
        response = httpx.get(f"{site.server.url}{path}", timeout=10)
        assert response.status_code == 200
        policy = response.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe-inline" not in policy
        assert response.headers["x-content-type-options"] == "nosniff"
    assert "/admin" not in httpx.get(f"{site.server.url}/openapi.json", timeout=10).json()["paths"]
    script = httpx.get(f"{site.server.url}/admin/app.js", timeout=10).text
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script
