"""Which held tunnels a route recheck cuts (recheck.py), pure: only SUP's definite answer cuts, a
failed lookup or a 404 that is not SUP's keeps everything."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

from sup.domain.login_pods import PodRoute
from sup.gateway import NoRoute, PersonRoute, SupApi
from sup.gateway.recheck import HeldTunnel, RouteRecheck
from sup.gateway.routes import Lookup, SupUnavailable


def _route(*pods: str) -> PersonRoute:
    return PersonRoute(
        "alice",
        frozenset({"SHA256:abc"}),
        tuple(
            PodRoute(name, "user" if name == "login" else "group", "alice", f"s-{name}", "ns", 22, True)
            for name in pods
        ),
    )


def _pass(
    answers: dict[str, Lookup | Exception], held: list[tuple[str, str]]
) -> tuple[list[tuple[str, str, str]], int]:
    """One recheck over `held` (username, pod) with SUP answering `answers`: what was cut (username,
    pod, reason), and how many people are still watched."""
    cut: list[tuple[str, str, str]] = []

    async def lookup(username: str) -> Lookup:
        await asyncio.sleep(0)
        answer = answers[username]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def run() -> int:
        recheck = RouteRecheck(lookup, concurrency=2)
        handles: dict[tuple[str, str], HeldTunnel] = {}

        def cutter(username: str, pod: str) -> Callable[[str], None]:
            def cut_it(reason: str) -> None:
                cut.append((username, pod, reason))
                recheck.release(handles[(username, pod)])  # as the tunnel's close does

            return cut_it

        for username, pod in held:
            handles[(username, pod)] = recheck.hold(username, pod, cutter(username, pod))
        done = await recheck.check()
        assert [(h.username, h.pod, reason) for h, reason in done] == cut
        return recheck.people()

    return cut, asyncio.run(run())


def test_only_a_definite_no_route_or_a_missing_pod_cuts() -> None:
    cut, watched = _pass(
        {
            "alice": _route("login"),  # left physics
            "bob": NoRoute("inactive"),  # suspended
            "carol": SupUnavailable("timeout"),
            "dave": NoRoute("unknown", definite=False),  # a 404 that is not SUP's
            "erin": _route("login", "physics"),
        },
        [
            ("alice", "login"),
            ("alice", "physics"),
            ("bob", "login"),
            ("bob", "physics"),
            ("carol", "login"),
            ("dave", "login"),
            ("erin", "physics"),
        ],
    )
    assert sorted(cut) == [
        ("alice", "physics", "no_such_pod"),
        ("bob", "login", "inactive"),
        ("bob", "physics", "inactive"),
    ]
    assert watched == 4  # alice (login), carol, dave, erin; bob released


def test_a_404_is_definite_only_when_it_names_one_of_sups_reasons() -> None:
    answers = {
        "/api/v1/gateway/routes/a": httpx.Response(404, json={"detail": "no route", "reason": "inactive"}),
        "/api/v1/gateway/routes/b": httpx.Response(404, json={"detail": "Not Found"}),
        "/api/v1/gateway/routes/c": httpx.Response(404, text="<html>not found</html>"),
        "/api/v1/gateway/routes/d": httpx.Response(404, json=["odd"]),
        "/api/v1/gateway/routes/e": httpx.Response(404, json={"reason": "made-up"}),
    }

    async def run() -> list[Lookup]:
        api = SupApi("http://sup.test/", "t", transport=httpx.MockTransport(lambda r: answers[r.url.path]))
        try:
            return [await api.route(name) for name in "abcde"]
        finally:
            await api.close()

    assert asyncio.run(run()) == [
        NoRoute("inactive"),
        NoRoute("unknown", definite=False),
        NoRoute("unknown", definite=False),
        NoRoute("unknown", definite=False),
        NoRoute("unknown", definite=False),
    ]
