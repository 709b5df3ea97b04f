"""The SSH gateway's view of a person, read from the store (SQLite and PostgreSQL), and the route it
gives: own key to own pod; another person's key, an unknown name, a suspended person refused."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.domain.login_pods import Refusal, RefusalReason, Route, route
from sup.domain.sshkeys import parse_ssh_public_key
from sup.groups.schemas import GroupCreate
from sup.groups.service import create_group
from sup.logins.person import gateway_person
from sup.users.schemas import UserCreate, UserPatch
from sup.users.service import create_user, update_user
from tests.conftest import ACTOR
from tests.support import keys

GROUP_PODS = ("physics",)


def fingerprint(line: str) -> str:
    return parse_ssh_public_key(line).fingerprint


def reason(result: object) -> RefusalReason:
    assert isinstance(result, Refusal), result
    return result.reason


def test_own_key_own_pod_and_group_pod(settings: Settings, sessions: sessionmaker[Session]) -> None:
    kim_key, laptop, saul_key = keys.ed25519_key(), keys.ed25519_key("laptop"), keys.ed25519_key()
    with sessions.begin() as session:
        create_group(session, settings, ACTOR, GroupCreate(name="physics"))
        create_group(session, settings, ACTOR, GroupCreate(name="chem"))
        create_user(
            session,
            settings,
            ACTOR,
            UserCreate(username="kim", ssh_public_keys=[kim_key, laptop], groups=["physics"]),
        )
        create_user(
            session, settings, ACTOR, UserCreate(username="saul", ssh_public_keys=[saul_key], groups=["chem"])
        )
    with sessions() as session:
        kim = gateway_person(session, "kim")
        assert gateway_person(session, "nobody") is None
    assert kim is not None
    assert kim.fingerprints == {fingerprint(kim_key), fingerprint(laptop)}
    assert kim.groups == {"physics"}  # memberships, as the snapshot has them (not the private group)
    assert (kim.active, kim.provisioned, kim.own_pod) == (True, True, True)
    assert route(kim, fingerprint(laptop), "login", GROUP_PODS) == Route("user", "kim")
    assert route(kim, fingerprint(kim_key), "physics", GROUP_PODS) == Route("group", "physics")
    assert reason(route(kim, fingerprint(saul_key), "login", GROUP_PODS)) is RefusalReason.WRONG_KEY
    assert reason(route(None, fingerprint(kim_key), "login", GROUP_PODS)) is RefusalReason.UNKNOWN


def test_suspended_person_refused(settings: Settings, sessions: sessionmaker[Session]) -> None:
    key = keys.ed25519_key()
    with sessions.begin() as session:
        create_user(session, settings, ACTOR, UserCreate(username="kim", ssh_public_keys=[key]))
    with sessions.begin() as session:
        update_user(session, settings, ACTOR, "kim", UserPatch(active=False))
    with sessions() as session:
        kim = gateway_person(session, "kim")
    assert kim is not None and not kim.active
    assert reason(route(kim, fingerprint(key), "login", GROUP_PODS)) is RefusalReason.INACTIVE


def test_access_and_login_groups(settings: Settings, sessions: sessionmaker[Session]) -> None:
    key = keys.ed25519_key()
    with sessions.begin() as session:
        create_group(session, settings, ACTOR, GroupCreate(name="physics"))
        create_group(session, settings, ACTOR, GroupCreate(name="shell"))
        create_user(
            session, settings, ACTOR, UserCreate(username="kim", ssh_public_keys=[key], groups=["physics"])
        )
    with sessions() as session:
        outside = gateway_person(session, "kim", access_groups=["hpc"])
        no_own_pod = gateway_person(session, "kim", login_groups=["shell"])
        own_pod = gateway_person(session, "kim", access_groups=["physics"], login_groups=["physics"])
    assert reason(route(outside, fingerprint(key), "login", GROUP_PODS)) is RefusalReason.NOT_PROVISIONED
    assert no_own_pod is not None and not no_own_pod.own_pod
    assert reason(route(no_own_pod, fingerprint(key), "login", GROUP_PODS)) is RefusalReason.NO_SUCH_POD
    assert route(no_own_pod, fingerprint(key), "physics", GROUP_PODS) == Route("group", "physics")
    assert route(own_pod, fingerprint(key), "login", GROUP_PODS) == Route("user", "kim")
