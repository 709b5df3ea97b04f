"""`sup user create|update|suspend|reactivate` and `sup group create|add|remove`: the admin API's
writes from a shell on the SUP host.

Each command builds the API's own request body (UserCreate, UserPatch, GroupCreate) and calls the
same service the API calls, so validation, errors, id allocation, the audit log (actor
`cli:<os user>`) and the outbox mark (the reconciler picks the change up within seconds) are the
API's. Bad input exits 5 and changes nothing; a command that names several users changes all of
them or none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError

from sup.cli.common import Exit, context, fail, out
from sup.cli.output import Format, output_option, print_object
from sup.groups import service as groups
from sup.groups.schemas import GroupCreate
from sup.store.lookup import require_group
from sup.users import service as users
from sup.users.schemas import UserCreate, UserPatch

M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], data: dict[str, Any]) -> M:
    """The API's body from the options given; its validation errors as the API words them."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
            for e in exc.errors(include_input=False)
        )
        fail(f"invalid input: {problems}", Exit.INVALID)


def _keys(keys: list[str], key_files: list[Path]) -> list[str]:
    """Key lines from --key and from --key-file (one per line; blank lines and # comments skipped)."""
    lines = list(keys)
    for path in key_files:
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            fail(
                f"cannot read --key-file {path}: {exc.strerror if isinstance(exc, OSError) else exc}",
                Exit.INVALID,
            )
        lines += [
            line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
        ]
    return lines


def given(**options: Any) -> dict[str, Any]:
    """The options given on the command line (None and empty lists: not given)."""
    return {name: value for name, value in options.items() if value is not None and value != []}


# The options create and update share, by the field of the API's body each one sets.
USER_FIELDS = {
    "email": "email",
    "display_name": "display_name",
    "given_name": "given_name",
    "family_name": "family_name",
    "uid": "uid_number",
    "gid": "primary_gid",
    "shell": "login_shell",
    "home": "home_directory",
    "group": "groups",
    "default_account": "slurm_default_account",
    "external_id": "external_id",
}


def _user_fields(options: dict[str, Any]) -> dict[str, Any]:
    """The API body's fields from a command's options (its parameters, by name): those given, and
    the keys of --key and --key-file."""
    fields = given(**{field: options[option] for option, field in USER_FIELDS.items()})
    return fields | given(ssh_public_keys=_keys(options["key"], options["key_file"]))


# Options shared by create and update (typer reads each default as the option's definition).
EMAIL = typer.Option(None, "--email", help="e-mail address")
DISPLAY = typer.Option(None, "--display-name", help="full name as shown (GECOS)")
GIVEN = typer.Option(None, "--given-name")
FAMILY = typer.Option(None, "--family-name")
UID = typer.Option(None, "--uid", help="uid number (inside ids.uid_range or a supplied range; never reused)")
GID = typer.Option(None, "--gid", help="primary gid (the private group's, or an existing group's)")
SHELL = typer.Option(None, "--shell", help="login shell, one of accounts.allowed_shells")
HOME = typer.Option(None, "--home", help="home directory (default from accounts.home_template)")
KEY = typer.Option([], "--key", help="an OpenSSH public key line (repeatable)")
KEY_FILE = typer.Option([], "--key-file", help="a file of OpenSSH public keys, one per line (repeatable)")
GROUP = typer.Option([], "--group", help="an existing group to be a member of (repeatable)")
ACCOUNT = typer.Option(None, "--default-account", help="the Slurm account to use by default")
EXTERNAL = typer.Option(None, "--external-id", help="the id of this person in another system")


def user_create(
    username: str = typer.Argument(..., help="POSIX username"),
    email: str | None = EMAIL,
    display_name: str | None = DISPLAY,
    given_name: str | None = GIVEN,
    family_name: str | None = FAMILY,
    uid: int | None = UID,
    gid: int | None = GID,
    shell: str | None = SHELL,
    home: str | None = HOME,
    key: list[str] = KEY,
    key_file: list[Path] = KEY_FILE,
    group: list[str] = GROUP,
    default_account: str | None = ACCOUNT,
    external_id: str | None = EXTERNAL,
    inactive: bool = typer.Option(False, "--inactive", help="create the account suspended"),
    output: Format = output_option(),
) -> None:
    """Create a user, as `POST /api/v1/users` does, and print them. Exit 4 if the name, uid or home
    is taken; 5 if an option is invalid."""
    body = _user_fields(locals()) | {"username": username, "active": not inactive}
    spec = validated(UserCreate, body)
    cli = context()
    with cli.transaction() as session:
        data = users.to_out(users.create_user(session, cli.settings, cli.actor, spec)).model_dump(mode="json")
    print_object(data, output)


def user_update(
    username: str = typer.Argument(..., help="the user to change"),
    rename: str | None = typer.Option(
        None, "--rename", help="a new username (uid, home volume and keys kept)"
    ),
    email: str | None = EMAIL,
    display_name: str | None = DISPLAY,
    given_name: str | None = GIVEN,
    family_name: str | None = FAMILY,
    uid: int | None = UID,
    gid: int | None = GID,
    shell: str | None = SHELL,
    home: str | None = HOME,
    key: list[str] = typer.Option([], "--key", help="an OpenSSH key line; the keys given replace all keys"),
    key_file: list[Path] = KEY_FILE,
    group: list[str] = typer.Option([], "--group", help="a group; the groups given replace all groups"),
    default_account: str | None = ACCOUNT,
    external_id: str | None = EXTERNAL,
    output: Format = output_option(),
) -> None:
    """Change the fields given, as `PATCH /api/v1/users/NAME` does (--key/--key-file and --group
    replace the whole set). Exit 3 if there is no such user."""
    changes = _user_fields(locals()) | given(username=rename)
    if not changes:
        fail("nothing to change: give at least one option (see --help)", Exit.USAGE)
    _patch(username, validated(UserPatch, changes), output)


def user_suspend(username: str = typer.Argument(...), output: Format = output_option()) -> None:
    """Deactivate a user: the targets lock the account (no keys, nologin shell, Slurm associations
    removed or blocked as `slurm.offboarding` says); nothing of theirs is deleted."""
    _patch(username, UserPatch(active=False), output)


def user_reactivate(username: str = typer.Argument(...), output: Format = output_option()) -> None:
    """Activate a suspended user again, with the uid and home they had."""
    _patch(username, UserPatch(active=True), output)


def _patch(username: str, patch: UserPatch, output: Format) -> None:
    cli = context()
    with cli.transaction() as session:
        user = users.update_user(session, cli.settings, cli.actor, username, patch, None)
        data = users.to_out(user).model_dump(mode="json")
    print_object(data, output)


def group_create(
    name: str = typer.Argument(..., help="POSIX group name"),
    gid: int | None = typer.Option(None, "--gid", help="gid number (else allocated from ids.gid_range)"),
    description: str | None = typer.Option(None, "--description"),
    member: list[str] = typer.Option([], "--member", help="an existing user (repeatable)"),
    external_id: str | None = EXTERNAL,
    output: Format = output_option(),
) -> None:
    """Create a group, as `POST /api/v1/groups` does, and print it."""
    spec = validated(
        GroupCreate,
        given(name=name, gid_number=gid, description=description, members=member, external_id=external_id),
    )
    cli = context()
    with cli.transaction() as session:
        data = groups.to_out(groups.create_group(session, cli.settings, cli.actor, spec)).model_dump(
            mode="json"
        )
    print_object(data, output)


def group_add(
    name: str = typer.Argument(..., help="the group"),
    usernames: list[str] = typer.Argument(..., help="users to add"),
) -> None:
    """Add members (a user already in the group is left as is). All or none: an unknown user
    changes nothing (exit 3)."""
    cli = context()
    with cli.transaction() as session:
        added = [
            u
            for u in dict.fromkeys(usernames)
            if groups.put_member(session, cli.settings, cli.actor, name, u)
        ]
        members = len(require_group(session, name).memberships)
    already = len(dict.fromkeys(usernames)) - len(added)
    out.print(f"group {name}: {len(added)} added, {already} already members; {members} members now")


def group_remove(
    name: str = typer.Argument(..., help="the group"),
    usernames: list[str] = typer.Argument(..., help="members to remove"),
) -> None:
    """Remove members. All or none: a user who is not a member changes nothing (exit 3)."""
    cli = context()
    with cli.transaction() as session:
        for username in dict.fromkeys(usernames):
            groups.delete_member(session, cli.actor, name, username)
        members = len(require_group(session, name).memberships)
    out.print(f"group {name}: {len(dict.fromkeys(usernames))} removed; {members} members now")


def register(user_app: typer.Typer, group_app: typer.Typer) -> None:
    """Add the writes to `sup user` and `sup group` (identities.py holds the reads)."""
    user_app.command("create")(user_create)
    user_app.command("update")(user_update)
    user_app.command("suspend")(user_suspend)
    user_app.command("reactivate")(user_reactivate)
    group_app.command("create")(group_create)
    group_app.command("add")(group_add)
    group_app.command("remove")(group_remove)
