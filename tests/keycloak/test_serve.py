"""`sup serve` pulling from the real Keycloak on its own (scheduled full pull, then admin events) into
the real slapd; `sup sync keycloak` and POST /api/v1/sources/keycloak/sync on demand."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from sup.config import Settings
from tests.ldap.site import Site
from tests.support.cli import run_sup, sup_env
from tests.support.keycloak import Realm
from tests.support.server import SupServer


def _env(settings: Settings, directory: Path) -> dict[str, str]:
    config = settings.model_dump(mode="json", by_alias=True, exclude_none=True)
    config["ldap"]["bind_password"] = settings.ldap.bind_password.get_secret_value()  # type: ignore[union-attr]
    config["keycloak"]["client_secret"] = settings.keycloak.client_secret.get_secret_value()  # type: ignore[union-attr]
    path = directory / "sup.yaml"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return sup_env(SUP_CONFIG=str(path))


@pytest.fixture
def servers() -> Iterator[list[SupServer]]:
    started: list[SupServer] = []
    yield started
    for server in started:
        server.stop()


def _eventually(check: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.5)


def test_serve_pulls_on_schedule_and_from_events(
    realm: Realm, ldap_site: Callable[..., Site], tmp_path: Path, servers: list[SupServer]
) -> None:
    site = ldap_site(keycloak={"interval_seconds": 3600, "events_seconds": 1})
    realm.add_user("uma", email="uma@example.org")
    env = _env(site.settings, tmp_path)
    servers.append(SupServer(env, tmp_path / "serve.log"))

    # The first full pull comes when the replica starts leading; the reconciler carries it to LDAP.
    assert _eventually(lambda: site.entry(site.user_dn("uma"))), (tmp_path / "serve.log").read_text()
    # Between full pulls (an hour apart here), admin events bring changes within seconds.
    team = realm.add_group("team")
    vic = realm.add_user("vic")
    realm.admin.group_user_add(vic, team)
    assert _eventually(lambda: site.entry(site.group_dn("team"))), (tmp_path / "serve.log").read_text()

    def vic_is_a_member() -> bool:
        members = (site.entry(site.group_dn("team")) or {}).get("member") or []
        return any(m.lower().startswith("uid=vic,") for m in members)

    # (the group may arrive empty first: its creation and the membership are separate events)
    assert _eventually(vic_is_a_member), (tmp_path / "serve.log").read_text()

    token = run_sup("token", "create", "--name", "ops", "--role", "operator", env=env).stdout.strip()
    server = servers[0]
    answer = httpx.post(
        f"{server.url}/api/v1/sources/keycloak/sync", headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["ok"] and answer.json()["writes"] == 0
    state = httpx.get(f"{server.url}/api/v1/sources/keycloak", headers={"Authorization": f"Bearer {token}"})
    assert state.status_code == 200 and state.json()["last_full_at"] is not None
    assert site.settings.keycloak is not None
    assert site.settings.keycloak.client_secret.get_secret_value() not in (tmp_path / "serve.log").read_text()


def test_sup_sync_keycloak_cli(realm: Realm, ldap_site: Callable[..., Site], tmp_path: Path) -> None:
    site = ldap_site(reconcile={"max_suspensions": 0})
    wendy = realm.add_user("wendy")
    env = _env(site.settings, tmp_path)

    done = run_sup("sync", "keycloak", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["created"] == ["wendy"]

    realm.admin.delete_user(wendy)
    refused = run_sup("sync", "keycloak", env=env)
    assert refused.returncode == 7 and "would suspend 1 of the 1" in refused.stderr
    # for scripts: the same exit code, the report says why; -o yaml is the same object as -o json
    as_json = run_sup("sync", "keycloak", "-o", "json", env=env)
    as_yaml = run_sup("sync", "keycloak", "-o", "yaml", env=env)
    assert as_json.returncode == as_yaml.returncode == 7
    report = json.loads(as_json.stdout)
    assert yaml.safe_load(as_yaml.stdout) == report
    assert report["ok"] is False and "would suspend 1 of the 1" in report["refused"]
    forced = run_sup("sync", "keycloak", "--force", "--json", env=env)
    assert forced.returncode == 0 and json.loads(forced.stdout)["suspended"] == ["wendy"]

    unconfigured = run_sup("sync", "keycloak", env=sup_env(SUP_DATABASE_URL=site.settings.database_url))
    assert unconfigured.returncode == 6 and "not configured" in unconfigured.stderr
