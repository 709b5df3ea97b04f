"""Three independent SCIM checkers against a live `sup serve` (a real process).

- scim-sanity has its own HTTP client and RFC 7643/7644 checks (no code shared with our server or
  its libraries): discovery, the User and Group lifecycles (POST, GET, PUT, PATCH, DELETE, 404
  after), group member PATCH, list/filter/paging/count=0, and error handling; strict mode, every
  check passing.
- scim2-tester (python-scim) reads the server's discovery endpoints, builds the resource models they
  describe (the SUP extension included) and fills every writable attribute with values of its own:
  create, read, PUT, PATCH add/replace/remove of each attribute, attribute projection, searches by
  GET, by POST `.search` and at the root, and an unknown URL. It shares scim2-models with the server
  (not scim2-server, not SUP's code). It found the empty `members[].display`, the gidNumber error
  reported as displayName and the missing root `.search` (docs/scim.md).
- A strict older client: scim2-client 0.7 on scim2-models 0.6, whose models forbid any attribute
  they do not declare (later versions ignore them), in a venv of its own. It refused SUP's
  discovery when /ServiceProviderConfig carried RFC 9865's `pagination`, and found the enterprise
  extension only under the name `SupEnterpriseUser` (RFC 7643 §8.7.1: `EnterpriseUser`).

The server runs with naming rules that accept the userNames such a checker sends (UUID-like: a
leading digit, long) and a rate limit it cannot hit (it does not back off on 429; the limit has its
own tests).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from scim2_client import BaseSyncSCIMClient
from scim2_tester import Status, check_server

from tests.support import keys
from tests.support.cli import run_sup, sup_env
from tests.support.server import SupServer

pytestmark = pytest.mark.postgres

# The strict client's venv: these pins and nothing else (pydantic as SUP pins it, so no other build).
STRICT_CLIENT_PINS = (
    "scim2-models==0.6.12",
    "scim2-client==0.7.5",
    "httpx==0.28.1",
    "pydantic==2.14.3",
    "pydantic_core==2.50.4",
)
STRICT_CLIENT_CHECK = Path(__file__).parent / "strict_client" / "check.py"


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
    for f in failed:
        print("FAIL", f)
    assert failed == [], failed
    skipped = {r["name"] for r in results if r["status"] == "skip"}
    # Only the draft agent extensions SUP does not announce are skipped.
    assert all("Agent" in name for name in skipped), skipped
    assert sum(r["status"] == "pass" for r in results) >= 25
    assert probe.returncode == 0, probe.stdout[-2000:]


class _HttpxClient(BaseSyncSCIMClient):
    """scim2-client over httpx (its own engine needs httpx2, which starlette's TestClient would then
    prefer over httpx for every other test)."""

    def __init__(self, client: httpx.Client) -> None:
        super().__init__()
        self.client = client

    def _parse_json(self, response: Any) -> Any:
        return response.json()

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return self.client.request(method, url, **kwargs)


class _Fresh(list[Any]):
    """A pydantic field's `examples` that give a new value each time scim2-tester picks one."""

    def __init__(self, make: Callable[[int], Any]) -> None:
        super().__init__([None])
        self.make = make
        self.picked = 0

    def __getitem__(self, index: Any) -> Any:
        self.picked += 1
        return self.make(self.picked)


# Values the SUP extension accepts: the checker's random ones (any int, any string) are refused by
# SUP's rules (uid and gid ranges, absolute paths, an allowed shell, OpenSSH keys), each a 400.
SUP_EXTENSION_VALUES: dict[str, Callable[[int], Any]] = {
    "uid_number": lambda n: 40000 + n,
    "gid_number": lambda n: 45000 + n,
    "login_shell": lambda n: ("/bin/bash", "/bin/zsh")[n % 2],
    "home_directory": lambda n: f"/home/conformance{n}",
    "ssh_public_keys": lambda n: keys.ed25519_key(f"conformance{n}"),
}


SUP = "urn:ietf:params:scim:schemas:extension:sup:2.0:User"


def _dumped(value: Any) -> Any:
    if isinstance(value, list):
        return [_dumped(v) for v in value]
    return value.model_dump() if hasattr(value, "model_dump") else value


def _without(value: Any, *keys: str) -> Any:
    """A dumped value, or each element of a list of them, without some keys."""
    if isinstance(value, list):
        return [_without(v, *keys) for v in value]
    return {k: v for k, v in value.items() if k not in keys} if isinstance(value, dict) else value


def sup_differs_as_documented(resource_type: str | None, title: str | None, reason: str, data: Any) -> bool:
    """Where SUP differs from what scim2-tester expects, on purpose (docs/scim.md lists each).

    scim2-tester expects a PATCH to return exactly the value it sent, and a `remove` to leave no
    value; SUP computes some values and keeps some attributes.
    """
    data = data if isinstance(data, dict) else {}
    urn = data.get("urn")
    expected = _dumped(data.get("expected"))
    returned = _dumped(data.get("modify_actual", data.get("actual")))
    if title == "check_remove_attribute" and resource_type == "User":
        # uidNumber and gidNumber cannot be removed (400 mutability); a removed loginShell or
        # homeDirectory comes back as the default one.
        kept = urn in (SUP, f"{SUP}:uidNumber", f"{SUP}:gidNumber") and "cannot be removed" in reason
        defaulted = urn in (f"{SUP}:loginShell", f"{SUP}:homeDirectory") and "did not remove" in reason
        return kept or defaulted
    if title not in ("check_add_attribute", "check_replace_attribute") or expected is None:
        return False
    if resource_type == "Group" and urn == "members":
        # A member's display is the user's displayName (else userName), not what the client sent.
        shown = isinstance(returned, list) and all(member.get("display") for member in returned)
        return shown and _without(expected, "display") == _without(returned, "display")
    if resource_type == "User" and urn == SUP:
        # `username` is read-only (derived from userName); the extension object carries no `schemas`.
        return bool(_without(expected, "username", "schemas") == _without(returned, "username", "schemas"))
    if resource_type == "User" and urn == f"{SUP}:sshPublicKeys" and title == "check_add_attribute":
        # `add` on a multi-valued attribute adds to the values already there (RFC 7644 §3.5.2.1).
        return isinstance(returned, list) and set(expected) <= set(returned)
    return False


def test_scim2_tester_passes_every_check(live: tuple[str, str]) -> None:
    url, token = live
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        client = _HttpxClient(http)
        client.discover()
        extensions = [m for m in client.provider.models if str(m.__schema__) == SUP]
        assert len(extensions) == 1, client.provider.models
        for name, make in SUP_EXTENSION_VALUES.items():
            extensions[0].model_fields[name].examples = _Fresh(make)
        results = check_server(client)
    failed = [
        (r.resource_type, r.title, r.reason)
        for r in results
        if r.status is not Status.SUCCESS
        and not sup_differs_as_documented(r.resource_type, r.title, r.reason or "", r.data)
    ]
    assert failed == [], failed
    if os.environ.get("SCIM2_TESTER_REPORT"):
        for r in results:
            print(r.status.name, r.resource_type, r.title, (r.reason or "")[:150].replace("\n", " "))
    passed = {(r.resource_type, r.title) for r in results if r.status is Status.SUCCESS}
    for resource_type in ("User", "Group"):
        for title in ("object_creation", "object_query", "object_replacement", "search_with_attributes"):
            assert (resource_type, title) in passed, (resource_type, title)
    assert sum(r.status is Status.SUCCESS for r in results) >= 60


@pytest.fixture(scope="session")
def strict_client_python() -> Path:
    """A venv holding only the strict client's pins, built once under ${SUP_CACHE_DIR:-~/.cache/sup}
    (pip finds the packages as it finds SUP's)."""
    cache = Path(os.environ.get("SUP_CACHE_DIR") or Path.home() / ".cache" / "sup")
    pins = "\n".join(STRICT_CLIENT_PINS)
    target = cache / "scim-strict-client" / hashlib.sha256(pins.encode()).hexdigest()[:12]
    python = target / "bin" / "python"
    if not (target / "pins.txt").exists():
        # Built aside and renamed into place: a run stopped halfway, or two runs at once, never
        # leave a half-built venv where the next run looks.
        building = target.parent / f"{target.name}.{os.getpid()}"
        shutil.rmtree(building, ignore_errors=True)
        venv.EnvBuilder(with_pip=True).create(building)
        pip = [
            str(building / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ]
        installed = subprocess.run(
            [*pip, *STRICT_CLIENT_PINS], capture_output=True, text=True, timeout=300, check=False
        )
        assert installed.returncode == 0, installed.stderr[-2000:]
        (building / "pins.txt").write_text(pins)
        try:
            building.rename(target)
        except OSError:  # another run put its own in place first
            shutil.rmtree(building)
    return python


def test_a_strict_older_client_discovers_creates_replaces_patches_and_deletes(
    live: tuple[str, str], strict_client_python: Path
) -> None:
    url, token = live
    run = subprocess.run(
        [str(strict_client_python), str(STRICT_CLIENT_CHECK), url, token],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout)
    # Discovery: every document validated strictly, the extension found by RFC 7643's name.
    assert "pagination" not in seen["config"] and seen["config"]["filter"]["supported"]
    assert (
        seen["schema_names"]["urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"] == "EnterpriseUser"
    )
    assert seen["user_extensions"] == ["EnterpriseUser", "SupUser"]
    enterprise = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
    wanted = {"employeeNumber": "E-1001", "organization": "Research", "department": "GPU Platform"}
    assert seen["created"][enterprise] == wanted
    # A whole-user PUT with a password hash and read-only attributes: accepted, the password dropped,
    # what SUP derived (uid, POSIX name) kept.
    assert seen["replace_status"] == 200 and "password" not in seen["replaced_raw_keys"]
    sup_before = seen["created"]["urn:ietf:params:scim:schemas:extension:sup:2.0:User"]
    for answer in (seen["replaced"], seen["queried_after_replace"]):
        assert answer["displayName"] == "Strict Client Renamed" and answer["id"] == seen["created"]["id"]
        assert answer[enterprise] == wanted
        assert answer["urn:ietf:params:scim:schemas:extension:sup:2.0:User"] == sup_before
    assert seen["patched"]["title"] == "Engineer"
    members = [m["value"] for m in seen["group_with_member"].get("members", [])]
    assert members == [seen["created"]["id"]] and not seen["group_without_member"].get("members")
    assert seen["users_found"] == 1 and seen["status_after_delete"] == 404
