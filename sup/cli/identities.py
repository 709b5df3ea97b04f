"""`sup user` and `sup group`: read what the store holds (the writes: identity_writes.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import typer
from rich.table import Table
from sqlalchemy.orm import Session

from sup.cli.common import context, out
from sup.cli.output import Format, chosen, output_option, print_data, print_fields, print_object, print_rows
from sup.groups import service as groups
from sup.store.lookup import require_group
from sup.users import service as users
from sup.users.status import status_of

user_app = typer.Typer(help="Users in the store.", no_args_is_help=True)
group_app = typer.Typer(help="Groups in the store.", no_args_is_help=True)

PAGE = 1000
# The table of `sup user list`: header, field of the API's UserOut.
USER_COLUMNS = (
    ("username", "username"),
    ("uid", "uid_number"),
    ("gid", "primary_gid"),
    ("active", "active"),
    ("email", "email"),
    ("groups", "groups"),
)
T = TypeVar("T")


def everything(session: Session, fetch: Callable[[Session, int, int], tuple[list[T], int]]) -> list[T]:
    """All rows of a paged listing, a page at a time (bounded memory per query)."""
    rows: list[T] = []
    offset = 0
    while True:
        page, total = fetch(session, PAGE, offset)
        rows += page
        offset += PAGE
        if offset >= total:
            return rows


@user_app.command("list")
def user_list(
    active: bool | None = typer.Option(
        None, "--active/--inactive", help="only active or only inactive users"
    ),
    group: str | None = typer.Option(None, "--group", help="only members of this group"),
    output: Format = output_option(),
    as_json: bool = typer.Option(False, "--json", help="the same as -o json"),
) -> None:
    """List users (all of them, sorted by username)."""
    cli = context()
    flt = users.UserFilter(active=active, group=group)
    with cli.transaction() as session:
        rows = [
            users.to_out(u).model_dump(mode="json")
            for u in everything(session, lambda s, limit, offset: users.list_users(s, flt, limit, offset))
        ]
    print_rows(rows, chosen(output, as_json), USER_COLUMNS)


@user_app.command("show")
def user_show(
    username: str = typer.Argument(...),
    output: Format = output_option(),
    as_json: bool = typer.Option(False, "--json", help="the same as -o json"),
) -> None:
    """Show one user and their provisioning state per target. Exit code 3 if there is no such user."""
    cli = context()
    with cli.transaction() as session:
        data = users.to_out(users.get_user(session, username)).model_dump(mode="json")
        status = status_of(session, cli.settings, username)
    if print_data(
        {**data, "status": [t.model_dump(mode="json") for t in status.targets]}, chosen(output, as_json)
    ):
        return
    print_fields(data)
    table = Table("target", "state", "since", "last error")
    for t in status.targets:
        since = t.updated_at.isoformat(timespec="seconds") if t.updated_at else "-"
        table.add_row(t.target, t.state, since, t.last_error or "")
    out.print(table)


@group_app.command("list")
def group_list(
    private: bool | None = typer.Option(
        None, "--private/--ordinary", help="only private or only ordinary groups"
    ),
    output: Format = output_option(),
    as_json: bool = typer.Option(False, "--json", help="the same as -o json"),
) -> None:
    """List groups (sorted by name)."""
    cli = context()
    flt = groups.GroupFilter(private=private)
    with cli.transaction() as session:
        rows = [
            groups.to_out(g).model_dump(mode="json")
            for g in everything(session, lambda s, limit, offset: groups.list_groups(s, flt, limit, offset))
        ]
    if print_data(rows, chosen(output, as_json)):
        return
    table = Table("name", "gid", "private", "members")
    for r in rows:
        table.add_row(
            r["name"], str(r["gid_number"]), "yes" if r["private"] else "no", str(len(r["members"]))
        )
    out.print(table)


@group_app.command("show")
def group_show(
    name: str = typer.Argument(...),
    output: Format = output_option(),
    as_json: bool = typer.Option(False, "--json", help="the same as -o json"),
) -> None:
    """Show one group with its members. Exit code 3 if there is no such group."""
    cli = context()
    with cli.transaction() as session:
        data = groups.to_out(require_group(session, name)).model_dump(mode="json")
    print_object(data, chosen(output, as_json))
