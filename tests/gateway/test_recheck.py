"""Access removed, sessions end (recheck.py): a tunnel held through the gateway is cut within
`route_recheck_seconds` + `route_cache_seconds` once SUP says its person may no longer reach the pod
(suspended, removed, out of the group), with a reason OpenSSH prints and an audit event; a SUP that
does not answer, or a 404 that is not SUP's, cuts nothing.

OpenSSH's own `ssh -J` holding a shell in a real sshd standing in for the pod; SUP's API is the
stand-in (tests/support/gateway_api.py)."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.gateway.scenario import GatewayScenario
from tests.support.gateway_api import GatewayApiStandIn
from tests.support.sshd import SshClient

RECHECK = 1.0  # route_recheck_seconds in these tests; route_cache_seconds 0
GUARD = 30  # seconds a test waits for what should come within RECHECK (a guard against a hang)
REMOVED = "your access to the login pod {} was removed"


def _hold(client: SshClient, pod: str) -> subprocess.Popen[str]:
    """`ssh -J` into `pod` holding a shell; returns once the shell is there."""
    session = client.popen("-J", client.jump("alice"), f"root@{pod}", "echo ready; exec sleep 600")
    assert session.stdout is not None
    assert session.stdout.readline() == "ready\n"
    return session


def _ended(session: subprocess.Popen[str]) -> str:
    """What the client printed once its session ended (within GUARD)."""
    try:
        _, stderr = session.communicate(timeout=GUARD)
    except subprocess.TimeoutExpired:
        session.kill()
        session.communicate()
        raise AssertionError(f"the session was not cut within {GUARD} s") from None
    return stderr


def _rechecks(api: GatewayApiStandIn, count: int) -> None:
    """Until the gateway asked SUP `count` more times for alice's route."""
    seen = len(api.route_calls)
    api.wait_for(lambda: api.route_calls[seen:].count("alice") >= count, timeout=GUARD)


def _stop(*sessions: subprocess.Popen[str]) -> None:
    for session in sessions:
        if session.poll() is None:
            session.kill()
        session.communicate()


@pytest.mark.parametrize("reason", ["inactive", "unknown", "not_provisioned"])
def test_a_suspended_or_removed_person_loses_the_tunnel_they_hold(
    scenario: GatewayScenario, reason: str
) -> None:
    api = scenario.api
    gateway = scenario.open_for_alice(route_recheck_seconds=RECHECK, route_cache_seconds=0)
    session = _hold(scenario.client(scenario.alice), "login")
    try:
        del api.routes["alice"]
        api.refusal_reasons["alice"] = reason
        removed = time.monotonic()

        stderr = _ended(session)
        took = time.monotonic() - removed

        assert session.returncode == 255
        assert REMOVED.format("login") in stderr  # the jump's "Received disconnect ...: 11: ..."
        assert gateway.tunnels() == 0
        api.wait_for(lambda: any(e["event"] == "cut" for e in api.events))
        cut = [(e["username"], e["reason"], e["pod"]) for e in scenario.events("cut")]
        assert cut == [("alice", reason, "login")]
        print(f"cut {took:.1f} s after the route went ({reason}); bound {RECHECK} s + one lookup")
    finally:
        _stop(session)


def test_leaving_a_group_cuts_the_group_pods_tunnel_and_keeps_the_own_one(scenario: GatewayScenario) -> None:
    api = scenario.api
    scenario.route_alice(groups=("physics",))
    scenario.pod.start()
    gateway = scenario.start_gateway(route_recheck_seconds=RECHECK, route_cache_seconds=0)
    client = scenario.client(scenario.alice)
    own, group = _hold(client, "login"), _hold(client, "physics")
    try:
        scenario.route_alice()  # no longer a member of physics

        stderr = _ended(group)
        assert group.returncode == 255
        assert REMOVED.format("physics") in stderr
        _rechecks(api, 2)  # two more passes: the own tunnel is still allowed, and kept
        assert own.poll() is None
        assert gateway.tunnels() == 1
        cut = [(e["reason"], e["pod"]) for e in scenario.events("cut")]
        assert cut == [("no_such_pod", "physics")]
    finally:
        _stop(own, group)


def test_a_sup_that_does_not_answer_cuts_nothing(scenario: GatewayScenario) -> None:
    """SUP answering 503 for a while, then something in front of it answering a 404 that names none
    of SUP's reasons: the held tunnel stays through both; once SUP answers that she is suspended, it
    is cut (so the rechecks were running all along)."""
    api = scenario.api
    gateway = scenario.open_for_alice(route_recheck_seconds=RECHECK, route_cache_seconds=0)
    session = _hold(scenario.client(scenario.alice), "login")
    try:
        del api.routes["alice"]
        api.refusal_reasons["alice"] = "inactive"
        for status in (503, 404):
            api.routes_status = status
            _rechecks(api, 3)
            assert session.poll() is None, f"cut while SUP answered {status}"
            assert gateway.tunnels() == 1
        assert scenario.events("cut") == []

        api.routes_status = None

        assert REMOVED.format("login") in _ended(session)
    finally:
        _stop(session)
