"""`sup db`: schema migrations."""

from __future__ import annotations

import typer

from sup.cli.common import context, out
from sup.cli.output import Format, output_option, print_data
from sup.store import migrate
from sup.store.migrate import current_revision, head_revision

app = typer.Typer(help="Database schema: create, upgrade and inspect it.", no_args_is_help=True)


@app.command()
def upgrade(revision: str = typer.Argument("head", help="target revision (default: the newest)")) -> None:
    """Bring the database schema up to date (creates it on an empty database). Safe to re-run."""
    cli = context()
    migrate.upgrade(cli.settings.database_url, revision)
    out.print(f"database at revision {current_revision(cli.engine)}")


@app.command()
def downgrade(revision: str = typer.Argument(..., help="target revision, e.g. -1 or base")) -> None:
    """Step the schema back (for rolling back a release). Data in dropped tables is lost."""
    cli = context()
    migrate.downgrade(cli.settings.database_url, revision)
    out.print(f"database at revision {current_revision(cli.engine) or 'base (empty)'}")


@app.command()
def current(output: Format = output_option()) -> None:
    """Print the schema revision of the database and the newest one this SUP knows. With -o json or
    yaml: {"current": revision or null, "head": revision}."""
    cli = context()
    revision = current_revision(cli.engine)
    if not print_data({"current": revision, "head": head_revision()}, output):
        out.print(f"current: {revision or 'none'}\nhead:    {head_revision()}")
