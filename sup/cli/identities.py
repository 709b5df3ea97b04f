"""`sup user` and `sup group`: read what the store holds."""

from __future__ import annotations

import typer
from rich.table import Table

from sup.cli.common import context, out, print_json
from sup.groups import service as groups
from sup.store.lookup import require_group
from sup.users import service as users

user_app = typer.Typer(help="Users in the store.", no_args_is_help=True)
group_app = typer.Typer(help="Groups in the store.", no_args_is_help=True)

PAGE = 1000


@user_app.command("list")
def user_list(
    active: bool | None = typer.Option(
        None, "--active/--inactive", help="only active or only inactive users"
    ),
    group: str | None = typer.Option(None, "--group", help="only members of this group"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List users (all of them, sorted by username)."""
    cli = context()
    flt = users.UserFilter(active=active, group=group)
    rows = []
    with cli.transaction() as session:
        offset = 0
        while True:
            page, total = users.list_users(session, flt, PAGE, offset)
            rows += [users.to_out(u) for u in page]
            offset += PAGE
            if offset >= total:
                break
    if as_json:
        print_json([r.model_dump(mode="json") for r in rows])
        return
    table = Table("username", "uid", "gid", "active", "email", "groups")
    for r in rows:
        table.add_row(
            r.username,
            str(r.uid_number),
            str(r.primary_gid),
            "yes" if r.active else "no",
            r.email or "",
            ",".join(r.groups),
        )
    out.print(table)


@user_app.command("show")
def user_show(
    username: str = typer.Argument(...), as_json: bool = typer.Option(False, "--json", help="print JSON")
) -> None:
    """Show one user. Exit code 3 if there is no such user."""
    cli = context()
    with cli.transaction() as session:
        data = users.to_out(users.get_user(session, username)).model_dump(mode="json")
    if as_json:
        print_json(data)
        return
    table = Table("field", "value", show_header=False)
    for key, value in data.items():
        table.add_row(key, "\n".join(value) if isinstance(value, list) else str(value))
    out.print(table)


@group_app.command("list")
def group_list(
    private: bool | None = typer.Option(
        None, "--private/--ordinary", help="only private or only ordinary groups"
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List groups (sorted by name)."""
    cli = context()
    flt = groups.GroupFilter(private=private)
    rows = []
    with cli.transaction() as session:
        offset = 0
        while True:
            page, total = groups.list_groups(session, flt, PAGE, offset)
            rows += [groups.to_out(g) for g in page]
            offset += PAGE
            if offset >= total:
                break
    if as_json:
        print_json([r.model_dump(mode="json") for r in rows])
        return
    table = Table("name", "gid", "private", "members")
    for r in rows:
        table.add_row(r.name, str(r.gid_number), "yes" if r.private else "no", str(len(r.members)))
    out.print(table)


@group_app.command("show")
def group_show(
    name: str = typer.Argument(...), as_json: bool = typer.Option(False, "--json", help="print JSON")
) -> None:
    """Show one group with its members. Exit code 3 if there is no such group."""
    cli = context()
    with cli.transaction() as session:
        data = groups.to_out(require_group(session, name)).model_dump(mode="json")
    if as_json:
        print_json(data)
        return
    table = Table("field", "value", show_header=False)
    for key, value in data.items():
        table.add_row(key, "\n".join(value) if isinstance(value, list) else str(value))
    out.print(table)
