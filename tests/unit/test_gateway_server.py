"""The pure parts of `sup gateway`: admission and limits, the route cache, SUP's answers read as the
contract says, the texts a person sees, the settings it reads."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import types

import httpx
import pytest
from pydantic import ValidationError

from sup.config.gateway import GatewaySettings
from sup.gateway import NoRoute, PersonRoute, PodRoute, SupApi, template_address
from sup.gateway.limits import Admission, EventBudget, SessionCounts, Verdict
from sup.gateway.routes import Lookup, RouteCache, SupUnavailable, parse_route
from sup.gateway.texts import did_not_start, help_text, no_such_pod, printable

POD = {
    "name": "login",
    "kind": "user",
    "owner": "alice",
    "service": "login-k1",
    "namespace": "ns",
    "port": 22,
    "awake": False,
}
ROUTE = {"username": "alice", "fingerprints": ["SHA256:abc"], "pods": [POD]}


# -- admission ------------------------------------------------------------------------------------


def test_admission_busy_above_max_connections_and_drop_above_twice() -> None:
    gate = Admission(max_connections=2, max_new_per_second=1000, now=0)
    assert [gate.arrive("a", 0) for _ in range(5)] == [
        Verdict.ADMIT,
        Verdict.ADMIT,
        Verdict.BUSY,
        Verdict.BUSY,
        Verdict.DROP,
    ]
    assert gate.open == 4  # a dropped connection is never counted (nor left)
    for _ in range(3):
        gate.leave("a", 0)
    assert gate.arrive("a", 0) is Verdict.ADMIT  # one admitted left open, so a place is free again


def test_admission_rate_refills_over_time() -> None:
    gate = Admission(max_connections=100, max_new_per_second=2, now=0)
    assert [gate.arrive("a", 0) for _ in range(3)] == [Verdict.ADMIT, Verdict.ADMIT, Verdict.BUSY]
    assert gate.arrive("a", 0.5) is Verdict.ADMIT  # one token back after half a second at 2/s
    assert gate.arrive("a", 0.5) is Verdict.BUSY
    assert gate.arrive("a", 10) is Verdict.ADMIT  # the bucket holds at most one second's worth
    assert gate.arrive("a", 10) is Verdict.ADMIT
    assert gate.arrive("a", 10) is Verdict.BUSY


def test_sessions_per_person() -> None:
    counts = SessionCounts(limit=2)
    assert [counts.acquire("alice"), counts.acquire("alice"), counts.acquire("alice")] == [True, True, False]
    assert counts.acquire("bob")
    counts.release("alice")
    assert counts.held("alice") == 1
    assert counts.acquire("alice")


def test_refusal_events_limited_per_source_and_minute() -> None:
    budget = EventBudget(per_minute=2)
    assert [budget.allow("10.0.0.1", 0), budget.allow("10.0.0.1", 1), budget.allow("10.0.0.1", 59)] == [
        True,
        True,
        False,
    ]
    assert budget.allow("10.0.0.2", 59)
    assert budget.allow("10.0.0.1", 60)  # a new minute


# -- the route cache ------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_route_cache_reuses_one_answer_per_person_for_its_time() -> None:
    asked: list[str] = []
    clock = Clock()

    async def fetch(username: str) -> Lookup:
        asked.append(username)
        await asyncio.sleep(0)
        return NoRoute("unknown")

    async def run() -> None:
        cache = RouteCache(fetch, 5, clock=clock)
        await asyncio.gather(*(cache.get("alice") for _ in range(10)))  # one request for a burst
        await cache.get("bob")
        clock.now += 4.9
        await cache.get("alice")
        assert asked == ["alice", "bob"]
        clock.now += 0.2
        await cache.get("alice")
        assert asked == ["alice", "bob", "alice"]
        cache.forget("alice")
        await cache.get("alice")
        assert asked == ["alice", "bob", "alice", "alice"]

    asyncio.run(run())


def test_route_cache_keeps_no_failure_and_stays_bounded() -> None:
    calls = 0

    async def fetch(username: str) -> Lookup:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise SupUnavailable("down")
        return NoRoute("unknown")

    async def run() -> None:
        cache = RouteCache(fetch, 5, clock=Clock(), max_entries=3)
        with pytest.raises(SupUnavailable):
            await cache.get("alice")
        assert await cache.get("alice") == NoRoute("unknown")  # asked again, not the failure
        for name in ("b", "c", "d", "e"):
            await cache.get(name)
        assert len(cache._entries) == 3

    asyncio.run(run())


# -- SUP's answers --------------------------------------------------------------------------------


def _api(handler: httpx.MockTransport) -> SupApi:
    return SupApi("http://sup.test/", "secret-token", transport=handler)


def test_routes_read_as_the_contract_says() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/api/v1/gateway/routes/alice":
            return httpx.Response(200, json=ROUTE)
        return httpx.Response(404, json={"detail": "no route", "reason": "inactive"})

    async def run() -> tuple[Lookup, Lookup, Lookup]:
        api = _api(httpx.MockTransport(answer))
        try:
            return await api.route("alice"), await api.route("../admin carol"), await api.route("x" * 300)
        finally:
            await api.close()

    alice, carol, too_long = asyncio.run(run())
    assert alice == PersonRoute(
        "alice", frozenset({"SHA256:abc"}), (PodRoute("login", "user", "alice", "login-k1", "ns", 22, False),)
    )
    assert carol == NoRoute("inactive")
    assert too_long == NoRoute("unknown")
    assert len(seen) == 2  # the too long name is not asked about
    assert seen[1].url.raw_path == b"/api/v1/gateway/routes/..%2Fadmin%20carol"
    assert all(r.headers["Authorization"] == "Bearer secret-token" for r in seen)


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(500, text="oops"),
        httpx.Response(200, text="not json"),
        httpx.Response(200, json={"pods": []}),
    ],
)
def test_a_sup_that_does_not_answer_the_contract_is_unavailable(response: httpx.Response) -> None:
    async def run() -> None:
        api = _api(httpx.MockTransport(lambda request: response))
        try:
            with pytest.raises(SupUnavailable) as caught:
                await api.route("alice")
            assert "secret-token" not in str(caught.value)
        finally:
            await api.close()

    asyncio.run(run())


def test_wake_event_and_heartbeat_bodies() -> None:
    posted: list[tuple[str, object]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        posted.append((request.url.path, json.loads(request.content)))
        return httpx.Response(200 if request.url.path.endswith("/wake") else 204, json={"awake": True})

    async def run() -> None:
        api = _api(httpx.MockTransport(answer))
        group = PodRoute("physics", "group", "physics", "group-k2", "ns", 22, False)
        try:
            await api.wake(group)
            await api.event({"event": "login"})
            await api.heartbeat({"gateway": "gw-1", "sessions": [], "busy": []})
        finally:
            await api.close()

    asyncio.run(run())
    assert posted == [
        ("/api/v1/gateway/wake", {"kind": "group", "name": "physics"}),
        ("/api/v1/gateway/events", {"event": "login"}),
        ("/api/v1/gateway/heartbeat", {"gateway": "gw-1", "sessions": [], "busy": []}),
    ]


def test_the_api_client_makes_the_absent_sniffio_fail_to_import_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """httpcore imports sniffio on every request; absent, each import searched sys.path again."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "sniffio" else find_spec(name, *a)
    )
    monkeypatch.setitem(sys.modules, "sniffio", None)  # undone at the end: absent again
    monkeypatch.delitem(sys.modules, "sniffio")
    from httpcore._synchronization import current_async_library

    async def run() -> str:
        api = _api(httpx.MockTransport(lambda request: httpx.Response(204)))
        await api.close()
        return current_async_library()

    assert asyncio.run(run()) == "asyncio"
    assert "sniffio" in sys.modules and sys.modules["sniffio"] is None


def test_an_installed_sniffio_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    installed = types.ModuleType("sniffio")
    monkeypatch.setitem(sys.modules, "sniffio", installed)
    asyncio.run(_api(httpx.MockTransport(lambda request: httpx.Response(204))).close())
    assert sys.modules["sniffio"] is installed


def test_parse_route_orders_pods_as_sup_sends_them() -> None:
    group = {**POD, "name": "physics", "kind": "group", "owner": "physics", "awake": True}
    route = parse_route({**ROUTE, "pods": [POD, group]})
    assert [p.name for p in route.pods] == ["login", "physics"]
    assert route.pod("physics") == PodRoute("physics", "group", "physics", "login-k1", "ns", 22, True)
    assert route.pod("chemistry") is None


# -- where a pod is, what a person reads, the settings --------------------------------------------


def test_pod_address_from_the_template() -> None:
    pod = PodRoute("login", "user", "alice", "login-k1", "sup", 2022, True)
    assert template_address("{service}.{namespace}.svc")(pod) == ("login-k1.sup.svc", 2022)
    assert template_address("{service}.{namespace}.svc.cluster.local")(pod) == (
        "login-k1.sup.svc.cluster.local",
        2022,
    )


def test_pod_address_with_an_unknown_field_fails_at_start() -> None:
    with pytest.raises(ValidationError, match="pod_address may use"):
        GatewaySettings(pod_address="{service}.{nmespace}.svc")
    assert GatewaySettings().pod_address == "{service}.{namespace}.svc"


def test_help_text_names_the_person_and_the_gateway() -> None:
    text = help_text("alice", "login.cluster.example")
    assert "ssh -J alice@login.cluster.example alice@login" in text
    assert "ProxyJump alice@login.cluster.example" in text
    assert "THIS-GATEWAY" in help_text("alice", None)


def test_names_from_the_client_are_echoed_printable_and_bounded() -> None:
    assert no_such_pod("bob\x1b[2J") == "no login pod named bob?[2J"
    assert printable("x" * 100) == "x" * 64 + "..."
    assert did_not_start(60) == "your login pod did not start within 60 s; try again in a minute"
    assert did_not_start(2.5).startswith("your login pod did not start within 2.5 s")
