"""`sup token`: bearer tokens for the API and for SCIM connections."""

from __future__ import annotations

from datetime import timedelta

import typer
from rich.table import Table

from sup.cli.common import context, out
from sup.cli.output import Format, chosen, output_option, print_data
from sup.domain.roles import Role
from sup.store.models import utcnow
from sup.tokens import service

app = typer.Typer(help="API tokens: create, list, revoke.", no_args_is_help=True)


@app.command()
def create(
    name: str = typer.Option(..., "--name", help="unique name; shown in the audit log as the actor"),
    role: Role = typer.Option(
        ...,
        "--role",
        help="viewer reads; operator writes identities; admin does all; scim; gateway",
    ),
    expires_days: int | None = typer.Option(
        None, "--expires-days", min=1, help="expire after this many days"
    ),
) -> None:
    """Create a token and print it (only the token, on one line). It cannot be shown again."""
    cli = context()
    expires_at = utcnow() + timedelta(days=expires_days) if expires_days else None
    with cli.transaction() as session:
        _, secret = service.create_token(session, cli.actor, name, role, expires_at)
    typer.echo(secret)


@app.command("list")
def list_(
    output: Format = output_option(),
    as_json: bool = typer.Option(False, "--json", help="the same as -o json"),
) -> None:
    """List tokens: name, role, prefix, use. Secrets are never shown."""
    cli = context()
    with cli.transaction() as session:
        views = [service.token_view(t) for t in service.list_tokens(session)]
    if print_data(views, chosen(output, as_json)):
        return
    table = Table("name", "role", "prefix", "created", "last used", "expires")
    for v in views:
        table.add_row(
            v["name"],
            v["role"],
            v["prefix"],
            v["created_at"],
            v["last_used_at"] or "-",
            v["expires_at"] or "-",
        )
    out.print(table)


@app.command()
def revoke(name: str = typer.Argument(..., help="the token's name")) -> None:
    """Revoke a token: requests that use it get 401 from now on."""
    cli = context()
    with cli.transaction() as session:
        service.revoke_token(session, cli.actor, name)
    out.print(f"revoked token {name}")
