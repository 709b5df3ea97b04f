"""The gateway's poll of the idle reporters (sup/gateway_server/idle_poll.py), with httpx's mock
transport standing in for the pods: what counts as an answer, which pods are asked, and that a pod's
listener cannot make the gateway read more than a number."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from sup.domain.gateway import PodRoute
from sup.gateway_server.idle_poll import IdlePoller, parse_count
from sup.gateway_server.routes import SupUnavailable


@pytest.mark.parametrize(
    ("status", "body", "answer"),
    [
        (200, b"3\n", True),
        (200, b"0\n", False),
        (200, b"0", False),
        (200, b"", None),
        (200, b"-1\n", None),
        (200, b"two\n", None),
        (200, "٣".encode(), None),  # a digit, but not one the reporter writes
        (200, b"9" * 65, None),
        (500, b"3\n", None),
    ],
)
def test_an_answer_is_a_count(status: int, body: bytes, answer: bool | None) -> None:
    assert parse_count(status, body) is answer


def _pod(owner: str, kind: str = "user") -> PodRoute:
    service = ("login-" if kind == "user" else "group-") + owner
    return PodRoute("login" if kind == "user" else owner, kind, owner, service, "logins", 9101, True)  # type: ignore[arg-type]


def _poll(
    pods: list[PodRoute] | Exception, answers: dict[str, bytes], held: set[tuple[str, str]]
) -> tuple[IdlePoller, list[str]]:
    asked: list[str] = []

    def reporter(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.host)
        body = answers.get(request.url.host)
        if body is None:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, content=body)

    async def awake() -> list[PodRoute]:
        if isinstance(pods, Exception):
            raise pods
        return pods

    def address(pod: PodRoute) -> tuple[str, int]:
        return f"{pod.service}.{pod.namespace}.svc", pod.port

    poller = IdlePoller(awake, address, lambda: held, transport=httpx.MockTransport(reporter))
    return poller, asked


def test_the_pods_sup_names_are_asked_except_those_a_session_holds() -> None:
    pods = [_pod("kim"), _pod("lee"), _pod("zed"), _pod("lab", "group")]
    answers = {"login-kim.logins.svc": b"2\n", "login-lee.logins.svc": b"0\n", "group-lab.logins.svc": b"1\n"}
    poller, asked = _poll(pods, answers, held={("group", "lab")})
    asyncio.run(poller.poll())
    assert sorted(asked) == ["login-kim.logins.svc", "login-lee.logins.svc", "login-zed.logins.svc"]
    assert poller.busy() == [
        {"kind": "user", "name": "kim", "busy": True},
        {"kind": "user", "name": "lee", "busy": False},
        {"kind": "user", "name": "zed", "busy": None},
    ]


def test_when_sup_cannot_say_which_pods_the_last_answers_stay() -> None:
    poller, _ = _poll([_pod("kim")], {"login-kim.logins.svc": b"1\n"}, held=set())
    asyncio.run(poller.poll())
    kept = poller.busy()
    unavailable, asked = _poll(SupUnavailable("down"), {}, held=set())
    unavailable.answers = dict(poller.answers)
    asyncio.run(unavailable.poll())
    assert unavailable.busy() == kept == [{"kind": "user", "name": "kim", "busy": True}] and asked == []


def test_a_listener_that_sends_without_end_is_read_no_further_than_a_number() -> None:
    sent = 0

    async def endless() -> object:
        nonlocal sent
        while True:
            sent += 1
            yield b"1" * 1024

    def reporter(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=endless())  # type: ignore[arg-type]

    async def awake() -> list[PodRoute]:
        return [_pod("kim")]

    poller = IdlePoller(awake, lambda p: ("x", 1), lambda: set(), transport=httpx.MockTransport(reporter))
    asyncio.run(poller.poll())
    assert poller.busy() == [{"kind": "user", "name": "kim", "busy": None}] and sent <= 2
