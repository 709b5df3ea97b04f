"""`sup gateway`: run the SSH gateway (docs/ssh-gateway.md) from the `gateway` settings section.

With `gateway.workers` above 1 the parent binds the port and runs that many `sup gateway` children
on it, as `sup serve --workers` does (sup/cli/workers.py: signals passed on, a child's exit stops
all); child N serves its metrics on `metrics_port + N` (Prometheus counters are per process)."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import ssl
import sys
from pathlib import Path

import typer

from sup.cli.common import Exit, fail, settings_or_exit


def child_command(fd: int, index: int, log_level: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from sup.cli import main; main()",
        "gateway",
        "--fd",
        str(fd),
        "--worker",
        str(index),
        "--log-level",
        log_level,
    ]


def gateway(
    log_level: str = typer.Option("info", "--log-level", help="log level (debug, info, warning, error)"),
    fd: int | None = typer.Option(None, "--fd", hidden=True, help="serve on this inherited socket"),
    worker: int = typer.Option(0, "--worker", hidden=True, min=0, help="this child's index"),
) -> None:
    """Run the SSH gateway: people reach their login pod with `ssh -J user@gateway user@login`.

    Needs the `gateway` section with sup_url, token_file (an API token of role `gateway`) and
    host_key_file. No database: everything comes from SUP's /api/v1/gateway endpoints."""
    from prometheus_client import start_http_server

    from sup import logs
    from sup.cli import workers as supervisor
    from sup.gateway import Gateway, SupApi
    from sup.gateway.routes import tls_context
    from sup.gateway.server import read_host_key

    settings = settings_or_exit()
    section = settings.gateway
    if section is None:
        fail("no `gateway` settings section: the SSH gateway is not configured", Exit.NOT_READY)
    if not section.sup_url or not section.token_file:
        fail("gateway.sup_url and gateway.token_file are required to run the gateway", Exit.NOT_READY)
    try:
        token = Path(section.token_file).read_text(encoding="utf-8").strip()
    except OSError as exc:
        fail(f"cannot read gateway.token_file {section.token_file}: {exc.strerror}", Exit.NOT_READY)
    if not token:
        fail(f"gateway.token_file {section.token_file} is empty", Exit.NOT_READY)
    if section.sup_ca_file:
        try:
            tls_context(section.sup_ca_file)
        except (OSError, ssl.SSLError) as exc:
            fail(f"cannot read gateway.sup_ca_file {section.sup_ca_file}: {exc}", Exit.NOT_READY)
    try:
        host_key = read_host_key(section.host_key_file)
    except ValueError as exc:
        fail(str(exc), Exit.NOT_READY)
    logs.configure(settings.log.format, log_level)
    if log_level.lower() != "debug":
        for chatty in ("asyncssh", "httpx"):  # a line per connection or request otherwise
            logging.getLogger(chatty).setLevel(logging.WARNING)
    if fd is None and section.workers > 1:
        try:
            sock = supervisor.listen(section.listen_host, section.listen_port)
        except OSError as exc:
            fail(
                f"cannot listen on {section.listen_host}:{section.listen_port}: {exc.strerror}",
                Exit.NOT_READY,
            )
        raise typer.Exit(
            supervisor.supervise(
                sock,
                section.workers,
                log_level,
                False,
                lambda fd_, index: child_command(fd_, index, log_level),
            )
        )
    if section.metrics_port is not None:
        start_http_server(section.metrics_port + worker, addr=section.metrics_host)

    async def run() -> None:
        api = SupApi(section.sup_url or "", token, ca_file=section.sup_ca_file)
        server = Gateway(section, api, host_key)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        try:
            port = await server.start(sock=None if fd is None else socket.socket(fileno=fd))
        except OSError as exc:
            fail(
                f"cannot listen on {section.listen_host}:{section.listen_port}: {exc.strerror}",
                Exit.NOT_READY,
            )
        logging.getLogger("sup.gateway").info("gateway listening on %s:%d", section.listen_host, port)
        await stop.wait()
        await server.close()
        await api.close()

    asyncio.run(run())
