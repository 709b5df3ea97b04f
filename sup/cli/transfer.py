"""`sup import` and `sup export`: bulk onboarding from a file or an existing cluster, and back out.

Exit codes of `sup import` (as every command's, see sup/cli/common.py): 0 done (records left out with
--skip-invalid are listed, not an error), 2 usage, 4 some records could not be written (each listed;
the others were), 5 the input is invalid (every problem listed; nothing written), 6 settings or
database not ready (or the LDAP/Slurm source to adopt from is not configured or not reachable),
7 --prune refused by the mass-change guard (nothing written; --force), 8 --plan could not plan a target,
130 interrupted (Ctrl-C; whole chunks stay written, a re-run finishes the import).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlalchemy.orm import Session

from sup.cli.common import Cli, Exit, context, err, fail, out
from sup.cli.output import Format, chosen, output_option, print_data
from sup.sources.files.apply import Outcome, apply_plan
from sup.sources.files.document import Document, FileError, read_files
from sup.sources.files.export import dump, export_document
from sup.sources.files.guard import prune_refusal
from sup.sources.files.plan import Plan, make_plan
from sup.store.locks import LockTimeout, exclusive
from sup.store.session import make_sessionmaker


def import_(
    files: list[Path] | None = typer.Argument(
        None,
        help="CSV, YAML or JSON files (by extension); several are checked and imported as one",
        show_default=False,
    ),
    fmt: str | None = typer.Option(None, "--format", help="csv|yaml|json when the extension does not say"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the store changes; write nothing"),
    with_plan: bool = typer.Option(False, "--plan", help="with --dry-run: also print the target plan"),
    skip_invalid: bool = typer.Option(
        False, "--skip-invalid", help="import the valid records, list the rest"
    ),
    prune: bool = typer.Option(
        False, "--prune", help="suspend imported users and delete imported groups the file no longer has"
    ),
    force: bool = typer.Option(False, "--force", help="prune even above the reconcile mass-change limits"),
    from_ldap: bool = typer.Option(False, "--from-ldap", help="adopt the POSIX users and groups in LDAP"),
    from_slurm: bool = typer.Option(False, "--from-slurm", help="adopt the Slurm accounts and associations"),
    output: Format = output_option(),
    as_json: bool = typer.Option(False, "--json", help="the same as -o json"),
) -> None:
    """Create and update users, groups and Slurm accounts in bulk. The whole input is checked first:
    if anything is invalid nothing is written (unless --skip-invalid). Safe to re-run: an import
    writes only what differs from the store. With -o json or yaml: the report (summary, changes,
    problems, skipped, errors; with --plan the target plan); the exit codes are the same."""
    shown = chosen(output, as_json)  # (fmt is the input's format)
    cli = context()
    if not files and not (from_ldap or from_slurm):
        fail("give a FILE, or --from-ldap and/or --from-slurm", Exit.USAGE)
    if files and (from_ldap or from_slurm):
        fail("give a FILE or --from-ldap/--from-slurm, not both", Exit.USAGE)
    if with_plan and not dry_run:
        fail("--plan goes with --dry-run (a real import is followed by `sup reconcile`)", Exit.USAGE)
    if prune and (from_ldap or from_slurm):
        fail("--prune works with a file: an adoption only adds what the cluster has", Exit.USAGE)
    cli.require_migrated()
    doc = _read(cli, files or [], fmt, from_ldap=from_ldap, from_slurm=from_slurm)
    sessions = make_sessionmaker(cli.engine)
    try:
        with exclusive(cli.engine, "import", timeout=60):
            with sessions() as session:
                plan = make_plan(session, cli.settings, doc, skip_invalid=skip_invalid, prune=prune)
            if plan.problems:
                _report(plan, None, shown=shown, dry_run=True)
                raise typer.Exit(int(Exit.INVALID))
            refusal = None if force else prune_refusal(cli.settings, plan)
            if refusal is not None:
                _report(plan, None, shown=shown, dry_run=True)
                fail(refusal, Exit.PRECONDITION)
            if dry_run:
                target_plan = _target_plan(cli, plan) if with_plan else None
                _report(plan, None, shown=shown, dry_run=True, target_plan=target_plan)
                if target_plan is not None and not target_plan.ok:
                    raise typer.Exit(int(Exit.TARGET_FAILED))
                return
            outcome = _apply(cli, plan, quiet=shown is not Format.table)
    except KeyboardInterrupt:
        err.print(
            "interrupted: the chunks written so far stay (each whole, with its outbox marks); "
            "run the same import again to finish it",
            highlight=False,
        )
        raise typer.Exit(130) from None
    except LockTimeout:
        fail("another import is running", Exit.CONFLICT)
    _report(plan, outcome, shown=shown, dry_run=False)
    if outcome.errors:
        raise typer.Exit(int(Exit.CONFLICT))


def _read(cli: Cli, files: list[Path], fmt: str | None, *, from_ldap: bool, from_slurm: bool) -> Document:
    if files:
        try:
            return read_files(files, fmt)
        except FileError as exc:
            fail(str(exc), Exit.INVALID)
    from sup.sources.files.adopt import AdoptError, adopt

    try:
        return adopt(cli.settings, ldap=from_ldap, slurm=from_slurm)
    except AdoptError as exc:
        fail(str(exc), Exit.NOT_READY)


def _apply(cli: Cli, plan: Plan, *, quiet: bool) -> Outcome:
    sessions = make_sessionmaker(cli.engine)

    @contextmanager
    def transaction() -> Iterator[Session]:
        with sessions.begin() as session:
            yield session

    total = plan.writes
    if quiet or total < 200 or not sys.stderr.isatty():
        return apply_plan(plan, cli.settings, cli.actor, transaction)
    with progress_bar() as bar:
        task = bar.add_task("importing", total=total)
        return apply_plan(plan, cli.settings, cli.actor, transaction, lambda n: bar.advance(task, n))


def progress_bar() -> Progress:
    """A progress bar on stderr (callers show it only when stderr is a terminal)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


def _target_plan(cli: Cli, plan: Plan) -> Any:
    """The target plan as it would be after this import: the import is applied in one transaction
    that is rolled back after the targets were observed and diffed."""
    from sup.reconcile.planner import plan_from_session

    sessions = make_sessionmaker(cli.engine)
    with sessions() as session:

        @contextmanager
        def same() -> Iterator[Session]:
            yield session
            session.flush()

        apply_plan(plan, cli.settings, cli.actor, same)
        result = plan_from_session(cli.settings, session)
        session.rollback()
    return result


def _report(
    plan: Plan, outcome: Outcome | None, *, shown: Format, dry_run: bool, target_plan: Any = None
) -> None:
    counts = plan.counts()
    errors = outcome.errors if outcome else []
    for item, _ in errors:
        counts[item.kind]["errors"] += 1
    if shown is not Format.table:
        data: dict[str, Any] = {
            "dry_run": dry_run,
            "ok": not plan.problems and not errors,
            "summary": counts,
            "changes": [i.as_json() for i in plan.items if i.action != "unchanged"],
            "membership_changes": {
                "add": [{"group": g, "user": u} for g, u in sorted(plan.add_members)],
                "remove": [{"group": g, "user": u} for g, u in sorted(plan.remove_members)],
            },
            "problems": [p.as_json() for p in plan.problems],
            "skipped": [p.as_json() for p in plan.skipped],
            "errors": [{"kind": i.kind, "name": i.name, "error": m} for i, m in errors],
        }
        if target_plan is not None:
            data["plan"] = [c.as_json() for c in target_plan.changes]
        print_data(data, shown)
        return
    for problem in plan.problems:
        err.print(f"[red]invalid:[/red] {problem}", highlight=False, soft_wrap=True)
    if plan.problems:
        err.print(f"{len(plan.problems)} problem(s); nothing was written", highlight=False)
        return
    for problem in plan.skipped:
        err.print(f"[yellow]skipped:[/yellow] {problem}", highlight=False, soft_wrap=True)
    if dry_run:
        for item in plan.items:
            if item.action == "unchanged":
                continue
            said = ", ".join(f"{f}: {b!r} -> {a!r}" for f, (b, a) in item.changes.items())
            out.print(
                f"{item.action} {item.kind} {item.name}" + (f" ({said})" if said else ""), highlight=False
            )
        if plan.add_members or plan.remove_members:
            out.print(
                f"memberships: {len(plan.add_members)} to add, {len(plan.remove_members)} to remove",
                highlight=False,
            )
    for item, message in errors:
        err.print(f"[red]error:[/red] {item.kind} {item.name}: {message}", highlight=False, soft_wrap=True)
    table = Table(title="dry run: nothing written" if dry_run else "import")
    table.add_column("")
    columns = ("created", "updated", "unchanged", "pruned", "skipped", "errors")
    for column in columns:
        table.add_column(column, justify="right")
    for kind, row in counts.items():
        table.add_row(kind, *(str(row[c]) for c in columns))
    out.print(table)
    if target_plan is not None:
        from sup.reconcile.render import print_plan

        print_plan(target_plan, out)


def export(
    fmt: str = typer.Option("yaml", "--format", help="yaml or json"),
    output: Path | None = typer.Option(None, "--output", "-o", help="write to this file instead of stdout"),
) -> None:
    """Print the store as an import document: users, groups and Slurm accounts (`sup import` reads it)."""
    if fmt not in ("yaml", "json"):
        fail("--format is yaml or json", Exit.USAGE)
    cli = context()
    cli.require_migrated()
    with make_sessionmaker(cli.engine)() as session:
        text = dump(export_document(session), fmt)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
