"""Asking the idle reporters of the login pods that may sleep soon whether their person still runs
something (docs/ssh-gateway.md, "Scale to zero"), for the heartbeat's `busy`.

Every `heartbeat_seconds` the poller gets from SUP the awake pods that could be put to sleep within
three heartbeats (`GET /api/v1/gateway/awake`, each with the reporter's port) and asks each one's
reporter (`GET /busy` over HTTP at the pod's Service, at most `CONCURRENCY` at once, `TIMEOUT`
seconds each). The answer is a number of processes: more than zero is busy, zero is idle, anything
else (no connection, a timeout, not a number) is silent, which SUP treats as busy up to
`gateway.max_awake_hours`. Pods this replica holds a session to are not asked: the session holds them.
The answers of the last finished round are what the heartbeat sends; a round that cannot reach SUP
keeps the previous answers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any

import httpx

from sup.domain.login_pods import PodRoute
from sup.gateway import metrics
from sup.gateway.routes import SupUnavailable

log = logging.getLogger(__name__)

CONCURRENCY = 64  # reporters asked at once
TIMEOUT = 2.0  # seconds for one reporter's answer
MAX_ANSWER = 64  # bytes: the answer is one number

Pod = tuple[str, str]  # (kind, owner), as the heartbeat names a pod
PodAddress = Callable[[PodRoute], tuple[str, int]]


def parse_count(status: int, body: bytes) -> bool | None:
    """The reporter's answer: busy (a count above zero), idle (zero), or None (not an answer)."""
    text = body.strip()
    if status != 200 or len(text) > MAX_ANSWER or not (text.isascii() and text.isdigit()):
        return None
    return int(text) > 0


class IdlePoller:
    """One gateway replica's view of the reporters: `poll()` runs one round, `busy()` the heartbeat's
    list. `awake` is SUP's awake endpoint; `held` the pods this replica holds sessions to now."""

    def __init__(
        self,
        awake: Callable[[], Awaitable[list[PodRoute]]],
        address: PodAddress,
        held: Callable[[], Collection[Pod]],
        *,
        timeout: float = TIMEOUT,
        concurrency: int = CONCURRENCY,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._awake = awake
        self._address = address
        self._held = held
        self._limit = asyncio.Semaphore(concurrency)
        self._timeout = timeout
        self._client = httpx.AsyncClient(timeout=timeout, transport=transport, follow_redirects=False)
        self.answers: dict[Pod, bool | None] = {}

    async def close(self) -> None:
        await self._client.aclose()

    def busy(self) -> list[dict[str, Any]]:
        """The heartbeat's `busy`: each pod asked in the last round and what its reporter said."""
        return [
            {"kind": kind, "name": owner, "busy": answer}
            for (kind, owner), answer in sorted(self.answers.items())
        ]

    async def poll(self) -> None:
        """One round: ask the reporters of the pods SUP names that no session of ours holds."""
        try:
            pods = await self._awake()
        except SupUnavailable as exc:
            log.warning("awake pods not known, reporters not asked: %s", exc)
            return
        held = set(self._held())
        wanted = {(pod.kind, pod.owner): pod for pod in pods if (pod.kind, pod.owner) not in held}
        results = await asyncio.gather(*(self._ask(pod) for pod in wanted.values()))
        self.answers = dict(zip(wanted, results, strict=True))

    async def _ask(self, pod: PodRoute) -> bool | None:
        host, port = self._address(pod)
        async with self._limit:
            try:
                status, body = await asyncio.wait_for(
                    self._get(f"http://{_host(host)}:{port}/busy"), self._timeout
                )
            except (httpx.HTTPError, TimeoutError):
                metrics.IDLE_POLLS.labels("silent").inc()
                return None
        answer = parse_count(status, body)
        metrics.IDLE_POLLS.labels({True: "busy", False: "idle", None: "bad"}[answer]).inc()
        return answer

    async def _get(self, url: str) -> tuple[int, bytes]:
        """Status and at most MAX_ANSWER + 1 bytes of the body as sent: whoever listens on the port
        in a person's pod (the person may replace the reporter) cannot make the gateway read more.

        Read raw, never decoded: the reporter sends plain digits and is asked for `identity`; an
        answer in any other Content-Encoding is not an answer (status 0), and its body is not read.
        httpx would otherwise inflate each chunk whole before the cap is looked at: 58 KB of gzip
        that inflate to 60 MB made one poll allocate 140 MB."""
        body = b""
        async with self._client.stream("GET", url, headers={"Accept-Encoding": "identity"}) as response:
            encoding = response.headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                return 0, b""
            async for chunk in response.aiter_raw():
                body += chunk[: MAX_ANSWER + 1 - len(body)]
                if len(body) > MAX_ANSWER:
                    break
        return response.status_code, body

    async def run(self, interval: float) -> None:
        """Rounds every `interval` seconds until cancelled."""
        while True:
            await self.poll()
            await asyncio.sleep(interval)


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
