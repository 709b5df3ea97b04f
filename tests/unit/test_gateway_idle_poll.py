"""The gateway's poll of the idle reporters (sup/gateway/idle_poll.py), with httpx's mock
transport standing in for the pods (and a real HTTP server on 127.0.0.1 where the bytes on the wire
matter): what counts as an answer, which pods are asked, and that a pod's listener cannot make the
gateway read, or inflate, more than a number."""

from __future__ import annotations

import asyncio
import contextlib
import tracemalloc
import zlib

import httpx
import pytest

from sup.domain.login_pods import PodRoute
from sup.gateway.idle_poll import IdlePoller, parse_count
from sup.gateway.routes import SupUnavailable


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
        return httpx.Response(200, stream=httpx.ByteStream(body))  # streamed, as from the wire

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


async def _poll_a_local_server(response: bytes) -> tuple[IdlePoller, int]:
    """One poll round against a real HTTP server on 127.0.0.1 that answers every request with the
    raw `response`; also the peak of memory Python allocated during the round (tracemalloc)."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(response)
        with contextlib.suppress(ConnectionError):  # the poller stopped reading: as it should
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def awake() -> list[PodRoute]:
        return [_pod("kim")]

    poller = IdlePoller(awake, lambda p: ("127.0.0.1", port), lambda: set())
    async with server:
        tracemalloc.start()
        try:
            await poller.poll()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        await poller.close()
    return poller, peak


def _gzip_response(plain: bytes, times: int = 1) -> bytes:
    """A 200 answer whose body is `plain` repeated `times`, gzip-encoded."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # 16+: the gzip format
    body = b"".join(packer.compress(plain) for _ in range(times)) + packer.flush()
    head = f"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def test_a_gzip_bomb_from_a_replaced_reporter_is_no_answer_and_is_not_inflated() -> None:
    """58 KB of gzip that inflates to 60 MB: never inflated, it costs the gateway next to no memory
    (inflated, it cost some 140 MB per poll), and an encoded answer is not an answer."""
    bomb = _gzip_response(b"1" * 1_000_000, times=60)
    assert len(bomb) < 100_000
    poller, peak = asyncio.run(_poll_a_local_server(bomb))
    assert poller.busy() == [{"kind": "user", "name": "kim", "busy": None}]
    # Measured: 0.3 MB (1.6 MB in a fresh process, first connection); inflated it was 141 MB.
    assert peak < 10_000_000, f"{peak} bytes allocated to poll one reporter"


def test_only_a_plain_answer_counts_even_a_compressed_number_does_not() -> None:
    """The reporter sends plain digits and is asked for `identity`: an answer the gateway would have
    to decode is someone else's listener, so it is silent, not busy."""
    poller, _ = asyncio.run(_poll_a_local_server(_gzip_response(b"3\n")))
    assert poller.busy() == [{"kind": "user", "name": "kim", "busy": None}]
    plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n3\n"
    poller, _ = asyncio.run(_poll_a_local_server(plain))
    assert poller.busy() == [{"kind": "user", "name": "kim", "busy": True}]
