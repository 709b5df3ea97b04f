"""The `sup` command line."""

from __future__ import annotations

import typer

from sup import __version__
from sup.cli import (
    accounts,
    audit,
    db,
    gateway,
    homes,
    identities,
    identity_writes,
    reconcile,
    ssh,
    sync,
    tokens,
    transfer,
)
from sup.cli.common import Exit, context, fail
from sup.cli.sssd import sssd_config

app = typer.Typer(
    name="sup",
    help="SUP provisions identity-provider users and groups into LDAP, Slurm accounting and Kubernetes.\n\n"
    "Settings come from SUP_* environment variables and the YAML file named by SUP_CONFIG.\n\n"
    "Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 conflict, 5 invalid input, "
    "6 settings or database not ready, 7 precondition failed, 8 a target failed.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(db.app, name="db")
app.add_typer(tokens.app, name="token")
identity_writes.register(identities.user_app, identities.group_app)
app.add_typer(identities.user_app, name="user")
app.add_typer(identities.group_app, name="group")
app.add_typer(accounts.app, name="account")
app.add_typer(sync.app, name="sync")
app.add_typer(homes.app, name="homes")
app.add_typer(ssh.app, name="ssh")
app.add_typer(audit.app, name="audit")
app.command()(reconcile.plan)
app.command()(reconcile.reconcile)
app.command(name="sssd-config")(sssd_config)
app.command(name="import")(transfer.import_)
app.command()(transfer.export)
app.command()(gateway.gateway)


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (0.0.0.0 for all)"),
    port: int = typer.Option(8080, "--port", min=1, max=65535, help="TCP port"),
    log_level: str = typer.Option("info", "--log-level", help="log level (debug, info, warning, error)"),
    reconciler: bool = typer.Option(
        True, "--reconciler/--no-reconciler", help="also run the background reconciler (one replica leads)"
    ),
    workers: int = typer.Option(
        1,
        "--workers",
        min=1,
        max=64,
        help="API processes on the one port; the first also reconciles (PostgreSQL only when above 1)",
    ),
    fd: int | None = typer.Option(None, "--fd", hidden=True, help="serve on this inherited socket"),
) -> None:
    """Run the API and the reconciler: outbox-driven passes within seconds of a write, and a full
    pass every reconcile.interval_seconds. The schema must be current."""
    import socket

    import uvicorn

    from sup import logs
    from sup.app import create_app
    from sup.cli import workers as supervisor
    from sup.common import memory

    cli = context()
    cli.require_migrated()
    logs.configure(cli.settings.log.format, log_level)  # log.format: json (default) or text
    memory.limit_arenas()  # before the reconciler's and the API's threads (sup/common/memory.py)
    if workers > 1:
        if cli.engine.dialect.name == "sqlite":
            fail("--workers above 1 needs PostgreSQL: SQLite takes one writer at a time", Exit.USAGE)
        try:
            sock = supervisor.listen(host, port)
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc}", Exit.NOT_READY)
        cli.engine.dispose()  # the parent only supervises: no connection held
        raise typer.Exit(supervisor.supervise(sock, workers, log_level, reconciler))
    app_ = create_app(cli.settings, cli.engine, reconciler=reconciler)
    config = uvicorn.Config(
        app_,
        host=host,
        port=port,
        log_level=log_level,
        log_config=None,  # keep logs.configure's handler: uvicorn's lines in the same format
        proxy_headers=False,
        server_header=False,
        # uvicorn's default (5 s) equals httpx's pool expiry and is below load balancers' idle
        # timeouts: a client reusing a connection as SUP closes it gets a reset (api settings)
        timeout_keep_alive=cli.settings.api.keep_alive_seconds,
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=None if fd is None else [socket.socket(fileno=fd)])
    except OSError as exc:  # pragma: no cover - e.g. the port is taken
        fail(f"cannot listen on {host}:{port}: {exc}", Exit.NOT_READY)
    except KeyboardInterrupt:  # pragma: no cover - as uvicorn.run
        pass
    if not server.started:  # e.g. the app's startup failed (uvicorn.run's exit code too)
        raise typer.Exit(3)


@app.command()
def version() -> None:
    """Print SUP's version."""
    typer.echo(__version__)


def main() -> None:
    from sup.common import collector

    collector.tune()  # passes allocate by the hundred thousand: fewer full collections (collector.py)
    app()


__all__ = ["app", "context", "main"]
