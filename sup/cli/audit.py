"""`sup audit ship` and `sup audit tail`: the audit stream (settings `audit_out`) by hand, and the audit
log as JSON lines on stdout."""

from __future__ import annotations

import time

import typer
from sqlalchemy import func, select

from sup.audit.ship import AuditShipper, AuditStream, entry_line
from sup.cli.common import Exit, context, err, fail
from sup.store.locks import LockTimeout
from sup.store.models import AuditEntry
from sup.store.session import make_sessionmaker

app = typer.Typer(help="The audit log as a stream: ship it to the audit_out sinks, or print it.")


@app.command("ship")
def ship(
    once: bool = typer.Option(
        False, "--once", help="one pass, then exit; without it, keep shipping as `sup serve` does"
    ),
    wait: float = typer.Option(0.0, "--wait", help="seconds to wait while another SUP process is shipping"),
) -> None:
    """Ship the audit entries not shipped yet to each sink of `audit_out`, as `sup serve` does (the
    same cursors: what this ships, serve does not ship again). Exit 0 when every sink took them all,
    4 when another SUP process is shipping, 6 when audit_out is not set, 8 when a sink failed (its
    cursor stays: the next pass sends the same entries again)."""
    cli = context()
    cli.require_migrated()
    settings = cli.settings.audit_out
    if settings is None:
        fail("the audit stream is not configured (audit_out.file or audit_out.webhook)", Exit.NOT_READY)
    if not once:
        stream = AuditStream(settings, cli.engine)
        try:
            while True:
                time.sleep(stream.tick())
        except KeyboardInterrupt:
            stream.shipper.close()
            return
    shipper = AuditShipper(settings, cli.engine)
    try:
        report = shipper.ship(wait=wait)
    except LockTimeout:
        fail("another SUP process is shipping the audit log; try again, or --wait", Exit.CONFLICT)
    finally:
        shipper.close()
    for sink, count in report.delivered.items():
        err.print(f"{sink}: {count} entries shipped", highlight=False, markup=False)
    for sink, problem in report.failed.items():
        err.print(f"{sink}: failed: {problem}", highlight=False, markup=False)
    if report.failed:
        raise typer.Exit(int(Exit.TARGET_FAILED))


@app.command("tail")
def tail(
    last: int = typer.Option(10, "--last", "-n", min=0, help="start with the last N entries"),
    follow: bool = typer.Option(False, "--follow", "-f", help="keep printing new entries as they come"),
    interval: float = typer.Option(1.0, "--interval", min=0.1, help="seconds between looks, with -f"),
) -> None:
    """Print audit entries as JSON lines, the stream's format, on stdout (no cursor is read or
    moved). With -f, entries that commit late (behind a newer one) can be missed: the shipper is the
    exact way."""
    cli = context()
    cli.require_migrated()
    sessions = make_sessionmaker(cli.engine)
    with sessions() as session:
        newest = session.scalar(select(func.max(AuditEntry.id))) or 0
    cursor = max(0, newest - last)
    try:
        while True:
            with sessions() as session:
                rows = session.scalars(
                    select(AuditEntry).where(AuditEntry.id > cursor).order_by(AuditEntry.id).limit(1000)
                ).all()
            for row in rows:
                typer.echo(entry_line(row))
                cursor = row.id
            if not follow:
                if len(rows) < 1000:
                    return
                continue
            if len(rows) < 1000:
                time.sleep(interval)
    except KeyboardInterrupt:
        return
