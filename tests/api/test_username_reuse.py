"""A username on a live SSH certificate is not given to anyone else: a certificate names its person
by username only, so whoever took the name next would be logged in as by the previous holder's
certificate (the gateway, the login pods and a site's own sshd all admit it) until it expires."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sup.config.ssh_ca import SshCaSettings
from sup.sources.files.document import read_file
from sup.sources.files.plan import make_plan
from sup.ssh_ca.service import SshCa, names_on_live_certificates
from sup.store.audit import Actor, record
from sup.store.models import User
from tests.api.helpers import fields
from tests.conftest import ACTOR
from tests.support import keys
from tests.support.sshd import keygen

USERS = "/api/v1/users"


def _certify(sessions: sessionmaker[Session], tmp_path: Path, username: str) -> datetime:
    """SUP's CA signs a key of `username`'s, as POST /api/v1/me/ssh-certificate does; returns its
    valid_before."""
    keygen(tmp_path / "ca", "sup-ca")
    ca = SshCa(SshCaSettings(key_file=str(tmp_path / "ca")))
    with sessions.begin() as session:
        user = session.scalars(select(User).where(User.username == username)).one()
        made = ca.certify(
            session, Actor(name=f"self:{username}", role="self"), user, keys.ed25519_key(username)
        )
    return made.valid_before


def test_a_removed_persons_username_waits_for_their_certificates_to_expire(
    client: TestClient, operator: dict[str, str], sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    assert client.post(USERS, json={"username": "kim"}, headers=operator).status_code == 201
    until = _certify(sessions, tmp_path, "kim")
    assert client.delete(f"{USERS}/kim", headers=operator).status_code == 204

    again = client.post(USERS, json={"username": "kim"}, headers=operator)
    assert again.status_code == 409, again.text
    assert fields(again.json()) == {"username"}
    assert f"valid until {until:%Y-%m-%d %H:%M} UTC" in again.text
    assert client.get(f"{USERS}/kim", headers=operator).status_code == 404

    # nor by a rename: lee may not become kim either
    assert client.post(USERS, json={"username": "lee"}, headers=operator).status_code == 201
    renamed = client.patch(f"{USERS}/lee", json={"username": "kim"}, headers=operator)
    assert renamed.status_code == 409 and "previous holder" in renamed.text
    assert client.get(f"{USERS}/lee", headers=operator).status_code == 200

    # once the certificate has expired, the name is free
    with sessions() as session:
        assert names_on_live_certificates(session, ["kim"], until + timedelta(seconds=1)) == {}


def test_an_expired_certificate_does_not_hold_the_name(
    client: TestClient, operator: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        past = datetime.now(UTC) - timedelta(minutes=1)
        record(session, ACTOR, "sign_certificate", "user", "kim", after={"valid_before": past.isoformat()})
    assert client.post(USERS, json={"username": "kim"}, headers=operator).status_code == 201


def test_an_import_names_the_username_as_a_problem(
    client: TestClient, operator: dict[str, str], sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    assert client.post(USERS, json={"username": "kim"}, headers=operator).status_code == 201
    _certify(sessions, tmp_path, "kim")
    assert client.delete(f"{USERS}/kim", headers=operator).status_code == 204
    people = tmp_path / "people.yaml"
    people.write_text("users:\n  - username: kim\n  - username: lee\n")
    with sessions() as session:
        plan = make_plan(session, client.app.state.settings, read_file(people))  # type: ignore[attr-defined]
    assert [(p.name, p.field) for p in plan.problems] == [("kim", "username")]
    assert "previous holder" in plan.problems[0].message
