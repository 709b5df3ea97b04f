"""A `direct-tcpip` channel relayed to a login pod's sshd, bytes as they come, flow-controlled both
ways: when one side's write buffer is above its high-water mark, reading from the other side pauses
(asyncio's pause_writing/resume_writing on both transports), so a fast sender and a slow receiver
hold memory flat instead of queueing the whole transfer in the gateway.

The gateway cannot read what it relays: the person's client runs its own SSH connection to the pod
inside the channel."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import asyncssh

from sup.gateway import metrics, texts

RETRY_FIRST = 0.1  # seconds between connection attempts to a pod that is starting, doubling
ATTEMPT_SECONDS = 2.0  # one TCP connect attempt to a pod
RETRY_MAX = 1.0


class PodSide(asyncio.Protocol):
    """The TCP connection to the pod. Reading starts paused: nothing may be read (sshd speaks first)
    before the channel it goes to is open."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.channel: asyncssh.SSHTCPChannel[bytes] | None = None
        self.eof_from_pod = False
        self.eof_from_client = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.pause_reading()

    def data_received(self, data: bytes) -> None:
        if self.channel is not None:
            metrics.RELAY_BYTES.labels("to_client").inc(len(data))
            self.channel.write(data)

    def eof_received(self) -> bool:
        self.eof_from_pod = True
        if self.channel is not None:
            self.channel.write_eof()
        if self.eof_from_client:
            self.close_both()
        return True  # half open: the client may still send (asyncio reads no more, so no close seen)

    def close_both(self) -> None:
        """Both sides sent EOF: nothing more can pass, end the tunnel (a socket that hung up after
        its EOF would otherwise never be noticed)."""
        if self.transport is not None:
            self.transport.close()
        if self.channel is not None:
            self.channel.close()

    def pause_writing(self) -> None:
        if self.channel is not None:
            self.channel.pause_reading()

    def resume_writing(self) -> None:
        if self.channel is not None:
            self.channel.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.channel is not None:
            self.channel.close()


class Tunnel(asyncssh.SSHTCPSession[bytes]):
    """The channel side; `on_close` runs once when the tunnel ends (either side)."""

    def __init__(self, pod: PodSide, on_close: Callable[[], None]) -> None:
        assert pod.transport is not None
        self._pod = pod
        self._transport = pod.transport
        self._on_close: Callable[[], None] | None = on_close

    def buffered(self) -> int:
        """Bytes waiting in the gateway, to the pod and to the client (flow control bounds them)."""
        channel = self._pod.channel
        return self._transport.get_write_buffer_size() + (channel.get_write_buffer_size() if channel else 0)

    def connection_made(self, chan: asyncssh.SSHTCPChannel[bytes]) -> None:
        self._pod.channel = chan
        if self._transport.is_closing():  # the pod hung up while the channel was being confirmed
            chan.close()
            return
        self._transport.resume_reading()

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        metrics.RELAY_BYTES.labels("to_pod").inc(len(data))
        self._transport.write(data)

    def eof_received(self) -> bool:
        self._pod.eof_from_client = True
        if self._transport.can_write_eof():
            self._transport.write_eof()
        if self._pod.eof_from_pod:
            self._pod.close_both()
        return True

    def pause_writing(self) -> None:
        self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport.close()
        self.close()

    def close(self) -> None:
        """Abandon the tunnel before the channel opened, or after it closed (idempotent)."""
        self._transport.close()
        if self._on_close is not None:
            on_close, self._on_close = self._on_close, None
            on_close()


async def connect_pod(host: str, port: int, deadline: float, timeout: float) -> PodSide:
    """Connect to a pod's sshd, retrying while it starts, until `deadline` (time.monotonic()).

    ChannelOpenError "connect failed: your login pod did not start within N s" past the deadline."""
    loop = asyncio.get_running_loop()
    pause = RETRY_FIRST
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, texts.did_not_start(timeout))
        try:
            # A Service with no ready endpoint may drop the SYN rather than refuse it: each attempt
            # is bounded, so that a pod that comes up is found within a retry.
            async with asyncio.timeout(min(remaining, ATTEMPT_SECONDS)):
                _, side = await loop.create_connection(PodSide, host, port)
            return side
        except (OSError, TimeoutError):
            pass
        await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, RETRY_MAX)
