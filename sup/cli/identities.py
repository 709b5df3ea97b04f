"""`sup user` and `sup group`: read what the store holds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import typer
from pydantic import BaseModel
from rich.table import Table
from sqlalchemy.orm import Session

from sup.cli.common import context, out, print_json
from sup.groups import service as groups
from sup.store.lookup import require_group
from sup.users import service as users
from sup.users.status import status_of

user_app = typer.Typer(help="Users in the store.", no_args_is_help=True)
group_app = typer.Typer(help="Groups in the store.", no_args_is_help=True)

PAGE = 1000
T = TypeVar("T")


def _everything(session: Session, fetch: Callable[[Session, int, int], tuple[list[T], int]]) -> list[T]:
    """All rows of a paged listing, a page at a time (bounded memory per query)."""
    rows: list[T] = []
    offset = 0
    while True:
        page, total = fetch(session, PAGE, offset)
        rows += page
        offset += PAGE
        if offset >= total:
            return rows


def _show(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(data)
        return
    table = Table("field", "value", show_header=False)
    for key, value in data.items():
        table.add_row(key, "\n".join(value) if isinstance(value, list) else str(value))
    out.print(table)


def _dump(rows: Sequence[BaseModel]) -> None:
    print_json([row.model_dump(mode="json") for row in rows])


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
    with cli.transaction() as session:
        rows = [
            users.to_out(u)
            for u in _everything(session, lambda s, limit, offset: users.list_users(s, flt, limit, offset))
        ]
    if as_json:
        _dump(rows)
        return
    table = Table("username", "uid", "gid", "active", "email", "groups")
    for r in rows:
        active_text = "yes" if r.active else "no"
        table.add_row(
            r.username, str(r.uid_number), str(r.primary_gid), active_text, r.email or "", ",".join(r.groups)
        )
    out.print(table)


@user_app.command("show")
def user_show(
    username: str = typer.Argument(...), as_json: bool = typer.Option(False, "--json", help="print JSON")
) -> None:
    """Show one user and their provisioning state per target. Exit code 3 if there is no such user."""
    cli = context()
    with cli.transaction() as session:
        data = users.to_out(users.get_user(session, username)).model_dump(mode="json")
        status = status_of(session, cli.settings, username)
    if as_json:
        print_json({**data, "status": [t.model_dump(mode="json") for t in status.targets]})
        return
    _show(data, as_json=False)
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
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List groups (sorted by name)."""
    cli = context()
    flt = groups.GroupFilter(private=private)
    with cli.transaction() as session:
        rows = [
            groups.to_out(g)
            for g in _everything(session, lambda s, limit, offset: groups.list_groups(s, flt, limit, offset))
        ]
    if as_json:
        _dump(rows)
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
    _show(data, as_json)
