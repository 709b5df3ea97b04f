"""`sup sync keycloak`: pull users, groups and memberships from Keycloak now."""

from __future__ import annotations

import typer

from sup.cli.common import Exit, context, err, fail, out
from sup.cli.output import Format, chosen, output_option, print_data
from sup.errors import Conflict
from sup.store.session import make_sessionmaker

app = typer.Typer(help="Pull identities from a source now (`sup serve` also does it on a schedule).")


@app.command("keycloak")
def keycloak(
    force: bool = typer.Option(
        False, "--force", help="apply even if it suspends more users than reconcile.max_suspensions allows"
    ),
    output: Format = output_option(),
    as_json: bool = typer.Option(False, "--json", help="the same as -o json"),
    wait: float = typer.Option(60.0, "--wait", help="seconds to wait for a sync that is running"),
) -> None:
    """A full pull from the realm. Exit 0 when done (conflicts are reported), 7 when refused because
    it would suspend too many users (nothing changed; check, then --force), 8 when Keycloak could not be
    read or some users or groups could not be written. With -o json or yaml: the report (the names
    created, updated, suspended..., conflicts and errors); the exit codes are the same."""
    from sup.sources.keycloak.runner import full_sync  # python-keycloak: only imported when used

    cli = context()
    cli.require_migrated()
    if cli.settings.keycloak is None:
        fail("the Keycloak source is not configured (SUP_KEYCLOAK__URL, ...)", Exit.NOT_READY)
    try:
        report = full_sync(cli.settings, cli.engine, make_sessionmaker(cli.engine), force=force, wait=wait)
    except Conflict as exc:
        fail(exc.message, Exit.CONFLICT)
    if not print_data(report.as_json(), chosen(output, as_json)):
        out.print(
            f"read {report.users_read} users and {report.groups_read} groups; users: {len(report.created)} "
            f"created, {len(report.updated)} updated, {len(report.suspended)} suspended, "
            f"{len(report.reactivated)} reactivated; groups: {len(report.groups_created)} created, "
            f"{len(report.groups_updated)} updated, {len(report.groups_deleted)} deleted; memberships: "
            f"+{report.members_added} -{report.members_removed}",
            highlight=False,
            markup=False,
        )
    for conflict in report.conflicts:
        err.print(f"conflict: {conflict}", highlight=False, markup=False)
    for error in report.errors:
        err.print(f"error: {error}", highlight=False, markup=False)
    if report.refused:
        fail(report.refused, Exit.PRECONDITION)
    if report.errors:
        raise typer.Exit(int(Exit.TARGET_FAILED))
