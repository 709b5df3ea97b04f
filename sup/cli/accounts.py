"""`sup account list|show|create|update`: the Slurm accounts SUP manages, as `/api/v1/slurm/accounts`
has them (the same request bodies, validation, services, audit and outbox mark as the API)."""

from __future__ import annotations

import json
from typing import Any

import typer

from sup.cli.common import Exit, context, fail
from sup.cli.identities import everything
from sup.cli.identity_writes import given, validated
from sup.cli.output import Format, output_option, print_object, print_rows
from sup.slurm_accounts import service
from sup.slurm_accounts.schemas import SlurmAccountCreate, SlurmAccountPatch
from sup.store.lookup import require_account

app = typer.Typer(
    help="Slurm accounts in the store (SUP provisions them into slurmdbd).", no_args_is_help=True
)

COLUMNS = (
    ("name", "name"),
    ("parent", "parent"),
    ("group", "group"),
    ("fairshare", "fairshare"),
    ("qos", "qos"),
    ("partitions", "partitions"),
)

GROUP = typer.Option(None, "--group", help="members of this group get an association")
COORDINATORS = typer.Option(None, "--coordinators", help="members of this group coordinate the account")
PARENT = typer.Option(None, "--parent", help="'root' (the default) or another account SUP manages")
DESCRIPTION = typer.Option(None, "--description")
ORGANIZATION = typer.Option(None, "--organization")
FAIRSHARE = typer.Option(None, "--fairshare", help="the account's share")
QOS = typer.Option([], "--qos", help="a QoS slurmdbd defines (repeatable)")
DEFAULT_QOS = typer.Option(None, "--default-qos", help="one of the --qos")
PARTITION = typer.Option([], "--partition", help="a partition: one association per member each (repeatable)")
LIMITS = typer.Option(
    None,
    "--limits",
    help='the limits as a JSON object, e.g. \'{"grp_tres": {"gres/gpu": "16"}, "max_jobs": 50}\'',
)


# The options create and update share, each named as the field of the API's body it sets (the
# two others: --partition sets `partitions`, --limits the parsed `limits`).
ACCOUNT_FIELDS = (
    "group",
    "coordinators",
    "parent",
    "description",
    "organization",
    "fairshare",
    "qos",
    "default_qos",
)


def _account_fields(options: dict[str, Any]) -> dict[str, Any]:
    """The API body's fields from a command's options (its parameters, by name): those given."""
    fields = given(**{name: options[name] for name in ACCOUNT_FIELDS})
    return fields | given(partitions=options["partition"], limits=_limits(options["limits"]))


def _limits(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"invalid input: limits: not JSON ({exc.msg})", Exit.INVALID)


@app.command("list")
def account_list(
    parent: str | None = typer.Option(None, "--parent", help="only the children of this account"),
    group: str | None = typer.Option(None, "--group", help="only accounts bound to this group"),
    output: Format = output_option(),
) -> None:
    """List the accounts (sorted by name)."""
    cli = context()
    flt = service.AccountFilter(parent=parent, group=group)
    with cli.transaction() as session:
        rows = [
            service.to_out(a).model_dump(mode="json")
            for a in everything(
                session, lambda s, limit, offset: service.list_accounts(s, flt, limit, offset)
            )
        ]
    print_rows(rows, output, COLUMNS)


@app.command("show")
def account_show(name: str = typer.Argument(...), output: Format = output_option()) -> None:
    """Show one account. Exit code 3 if there is no such account."""
    cli = context()
    with cli.transaction() as session:
        data = service.to_out(require_account(session, name)).model_dump(mode="json")
    print_object(data, output)


@app.command("create")
def account_create(
    name: str = typer.Argument(..., help="the account's name in Slurm"),
    group: str | None = GROUP,
    coordinators: str | None = COORDINATORS,
    parent: str | None = PARENT,
    description: str | None = DESCRIPTION,
    organization: str | None = ORGANIZATION,
    fairshare: int | None = FAIRSHARE,
    qos: list[str] = QOS,
    default_qos: str | None = DEFAULT_QOS,
    partition: list[str] = PARTITION,
    limits: str | None = LIMITS,
    output: Format = output_option(),
) -> None:
    """Create an account, as `POST /api/v1/slurm/accounts` does."""
    spec = validated(SlurmAccountCreate, _account_fields(locals()) | {"name": name})
    cli = context()
    with cli.transaction() as session:
        data = service.to_out(service.create_account(session, cli.actor, spec)).model_dump(mode="json")
    print_object(data, output)


@app.command("update")
def account_update(
    name: str = typer.Argument(..., help="the account to change"),
    group: str | None = GROUP,
    coordinators: str | None = COORDINATORS,
    parent: str | None = PARENT,
    description: str | None = DESCRIPTION,
    organization: str | None = ORGANIZATION,
    fairshare: int | None = FAIRSHARE,
    qos: list[str] = typer.Option([], "--qos", help="a QoS; the ones given replace all"),
    default_qos: str | None = DEFAULT_QOS,
    partition: list[str] = typer.Option([], "--partition", help="a partition; the ones given replace all"),
    limits: str | None = typer.Option(None, "--limits", help="a JSON object that replaces all limits"),
    output: Format = output_option(),
) -> None:
    """Change the fields given, as `PATCH /api/v1/slurm/accounts/NAME` does."""
    changes = _account_fields(locals())
    if not changes:
        fail("nothing to change: give at least one option (see --help)", Exit.USAGE)
    patch = validated(SlurmAccountPatch, changes)
    cli = context()
    with cli.transaction() as session:
        data = service.to_out(service.update_account(session, cli.actor, name, patch)).model_dump(mode="json")
    print_object(data, output)
