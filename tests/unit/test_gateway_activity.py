"""The gateway's record of when its tunnels used each login pod, for the heartbeat's `used`
(sup/gateway/activity.py): a short session between two heartbeats, and the close of a long
one, reach SUP; what SUP did not accept is sent again; an open is told to SUP at once."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncssh
import httpx

from sup.config.gateway import GatewaySettings
from sup.gateway import PodRoute, SupApi
from sup.gateway.activity import Activity, in_use, used_body
from sup.gateway.routes import Lookup, SupUnavailable
from sup.gateway.server import Gateway

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
ALICE = ("user", "alice")
PHYSICS = ("group", "physics")
POD = PodRoute("login", "user", "alice", "login-k1", "ns", 22, True)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_latest_open_or_close_of_each_pod_is_reported_and_held_pods_at_the_heartbeat() -> None:
    activity = Activity()
    activity.note(ALICE, at(1))  # a short command: open, close, both between two heartbeats
    activity.note(ALICE, at(2))
    activity.note(ALICE, at(1.5))  # a close noted late never moves the time back
    activity.note(PHYSICS, at(3))
    assert activity.report([], at(5)) == {ALICE: at(2), PHYSICS: at(3)}
    assert activity.report([PHYSICS], at(5)) == {ALICE: at(2), PHYSICS: at(5)}  # held now
    assert used_body({PHYSICS: at(5), ALICE: at(2)}) == [
        {"kind": "group", "name": "physics", "at": "2026-11-24T12:00:05Z"},
        {"kind": "user", "name": "alice", "at": "2026-11-24T12:00:02Z"},
    ]


def test_a_delivered_report_is_forgotten_a_failed_one_and_later_uses_are_sent_again() -> None:
    activity = Activity()
    activity.note(ALICE, at(1))
    first = activity.report([], at(5))
    # the heartbeat did not reach SUP: nothing forgotten
    assert activity.report([], at(10)) == first
    activity.note(PHYSICS, at(6))  # while the next heartbeat is on its way
    second = activity.report([], at(6))
    activity.note(ALICE, at(7))  # a close after the report was made
    activity.delivered(second)
    assert activity.report([], at(10)) == {ALICE: at(7)}
    activity.delivered({ALICE: at(7)})
    assert activity.report([], at(15)) == {}
    assert activity.report([ALICE], at(15)) == {ALICE: at(15)}  # a tunnel held: in use at each one


class _Api:
    """SUP's side as the gateway sees it: records heartbeats; fails them while `down`."""

    def __init__(self) -> None:
        self.heartbeats: list[dict[str, Any]] = []
        self.down = False
        self.posted = asyncio.Event()

    async def route(self, username: str) -> Lookup:
        raise SupUnavailable("not used here")

    async def wake(self, pod: PodRoute) -> None:
        raise SupUnavailable("not used here")

    async def used(self, pod: PodRoute) -> bool:
        return True

    async def event(self, body: dict[str, Any]) -> None:
        pass

    async def heartbeat(self, body: dict[str, Any]) -> None:
        self.posted.set()
        if self.down:
            raise SupUnavailable("down")
        self.heartbeats.append(body)

    async def awake(self) -> list[PodRoute]:
        return []


def test_the_gateway_reports_a_tunnel_that_opened_and_closed_between_two_heartbeats() -> None:
    async def beat(gateway: Gateway, api: _Api) -> dict[str, Any] | None:
        """One turn of the heartbeat loop."""
        api.posted.clear()
        task = asyncio.create_task(gateway._beat())
        await api.posted.wait()
        task.cancel()
        return api.heartbeats[-1] if api.heartbeats and not api.down else None

    async def run() -> None:
        api = _Api()
        key = asyncssh.generate_private_key("ssh-ed25519")
        gateway = Gateway(GatewaySettings(heartbeat_seconds=1), api, key, replica="gw-1")
        try:
            before = datetime.now(UTC)
            ticket = gateway.tunnel_opened(POD, "alice", "10.0.0.7:5000", lambda: 0)
            gateway.tunnel_closed(ticket)  # `ssh cluster true`: done before any heartbeat
            after = datetime.now(UTC)
            api.down = True  # that heartbeat is lost: the next one still says it
            assert await beat(gateway, api) is None
            api.down = False
            body = await beat(gateway, api)
            assert body is not None and body["sessions"] == []  # nothing open at the heartbeat...
            [used] = body["used"]  # ...but alice's pod was used, at the close
            assert (used["kind"], used["name"]) == ALICE
            assert before <= datetime.fromisoformat(used["at"]) <= after
            body = await beat(gateway, api)
            assert body is not None and body["used"] == []  # delivered: not said again

            held = gateway.tunnel_opened(POD, "alice", "10.0.0.7:5001", lambda: 0)  # across heartbeats
            for _ in range(2):
                sent = datetime.now(UTC)
                body = await beat(gateway, api)
                assert body is not None and [u["name"] for u in body["used"]] == ["alice"]
                assert datetime.fromisoformat(body["used"][0]["at"]) >= sent
            gateway.tunnel_closed(held)
        finally:
            await gateway.close()

    asyncio.run(run())


def test_an_open_is_told_to_sup_before_the_relay_and_an_asleep_answer_means_wake() -> None:
    posted: list[tuple[str, object]] = []
    answers = iter(
        [
            httpx.Response(200, json={"awake": True}),
            httpx.Response(200, json={"awake": False}),  # a sleep committed since the route was read
            httpx.Response(404, json={"detail": "Not Found"}),  # an older SUP: as before
            httpx.Response(503, json={"detail": "down"}),  # SUP unavailable: as the route said
            httpx.Response(200, json={"awake": "yes"}),  # malformed: as the route said
        ]
    )

    def answer(request: httpx.Request) -> httpx.Response:
        posted.append((request.url.path, json.loads(request.content)))
        return next(answers)

    async def run() -> list[bool]:
        api = SupApi("http://sup.test", "secret-token", transport=httpx.MockTransport(answer))
        try:
            return [await in_use(api, POD) for _ in range(5)]
        finally:
            await api.close()

    assert asyncio.run(run()) == [True, False, True, True, True]
    assert posted == [("/api/v1/gateway/used", {"kind": "user", "name": "alice"})] * 5


def test_a_sup_older_than_used_gets_the_heartbeat_without_it() -> None:
    """During a rollout the gateway may be newer than SUP, whose heartbeat refuses unknown fields."""
    posted: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        posted.append(body)
        return httpx.Response(422 if "used" in body else 204, json={"detail": "extra field"})

    async def run() -> None:
        api = SupApi("http://sup.test", "secret-token", transport=httpx.MockTransport(answer))
        try:
            await api.heartbeat({"gateway": "gw-1", "sessions": [], "busy": [], "used": []})
        finally:
            await api.close()

    asyncio.run(run())
    assert posted == [
        {"gateway": "gw-1", "sessions": [], "busy": [], "used": []},
        {"gateway": "gw-1", "sessions": [], "busy": []},
    ]
