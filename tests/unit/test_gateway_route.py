"""The SSH gateway's route decision: who gets through with which key, to which login pod."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sup.domain.login_pods import (
    Access,
    GatewayPerson,
    Refusal,
    RefusalReason,
    Route,
    reachable,
    route,
)

KEY = "SHA256:aliceKeyAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
OTHER = "SHA256:bobKeyBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
GROUP_PODS = ("physics", "chem")

ALICE = GatewayPerson(
    username="alice",
    active=True,
    provisioned=True,
    own_pod=True,
    fingerprints=frozenset({KEY}),
    groups=frozenset({"physics", "biology"}),
)


def reason(result: object) -> RefusalReason:
    assert isinstance(result, Refusal), result
    return result.reason


def test_own_pod_and_group_pods_of_her_groups_only() -> None:
    assert reachable(ALICE, KEY, GROUP_PODS) == Access(
        "alice", KEY, (Route("user", "alice"), Route("group", "physics"))
    )


def test_login_routes_to_her_own_pod() -> None:
    assert route(ALICE, KEY, "login", GROUP_PODS) == Route("user", "alice")
    assert route(ALICE, KEY, "LOGIN", GROUP_PODS) == Route("user", "alice")


def test_a_group_pod_by_its_name() -> None:
    assert route(ALICE, KEY, "physics", GROUP_PODS) == Route("group", "physics")


@pytest.mark.parametrize(
    "destination",
    [
        "chem",  # a group pod, but she is not a member
        "biology",  # her group, but it has no pod
        "bob",  # another person's name is not a destination
        "login-bob",  # nor is an object name
        "login-bob.users.svc.cluster.local",
        "10.0.0.1",
        "",
    ],
)
def test_no_other_destination(destination: str) -> None:
    assert reason(route(ALICE, KEY, destination, GROUP_PODS)) is RefusalReason.NO_SUCH_POD


def test_unknown_person() -> None:
    assert reason(route(None, KEY, "login", GROUP_PODS)) is RefusalReason.UNKNOWN


def test_suspended_person_even_with_her_key() -> None:
    suspended = replace(ALICE, active=False)
    assert reason(reachable(suspended, KEY, GROUP_PODS)) is RefusalReason.INACTIVE
    assert reason(route(suspended, KEY, "login", GROUP_PODS)) is RefusalReason.INACTIVE


def test_not_provisioned() -> None:
    outside = replace(ALICE, provisioned=False)
    assert reason(route(outside, KEY, "login", GROUP_PODS)) is RefusalReason.NOT_PROVISIONED


def test_another_persons_key() -> None:
    assert reason(reachable(ALICE, OTHER, GROUP_PODS)) is RefusalReason.WRONG_KEY
    assert reason(route(ALICE, OTHER, "login", GROUP_PODS)) is RefusalReason.WRONG_KEY


def test_a_person_without_keys_gets_nowhere() -> None:
    keyless = replace(ALICE, fingerprints=frozenset())
    assert reason(route(keyless, "", "login", GROUP_PODS)) is RefusalReason.WRONG_KEY


def test_no_own_pod_but_a_group_pod() -> None:
    member_only = replace(ALICE, own_pod=False)
    assert reason(route(member_only, KEY, "login", GROUP_PODS)) is RefusalReason.NO_SUCH_POD
    assert route(member_only, KEY, "physics", GROUP_PODS) == Route("group", "physics")


def test_no_pod_at_all() -> None:
    nothing = replace(ALICE, own_pod=False, groups=frozenset({"biology"}))
    assert reason(reachable(nothing, KEY, GROUP_PODS)) is RefusalReason.NO_LOGIN_POD


def test_her_own_pod_wins_over_a_group_named_login() -> None:
    assert route(replace(ALICE, groups=frozenset({"login"})), KEY, "login", ("login",)) == Route(
        "user", "alice"
    )


def test_the_refusal_detail_names_no_key_material_but_the_fingerprint() -> None:
    refusal = route(ALICE, OTHER, "login", GROUP_PODS)
    assert isinstance(refusal, Refusal)
    assert refusal.detail == f"{OTHER} is not a key of alice"
