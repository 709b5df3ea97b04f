"""`sup plan` and `sup reconcile`: see what the targets need, then make it so."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import typer

from sup.cli.common import Exit, context, err, fail, out
from sup.cli.output import Format, chosen, output_option, print_data
from sup.reconcile.planner import run_pass
from sup.reconcile.render import pass_json, print_plan
from sup.store.locks import LockTimeout, exclusive
from sup.store.session import make_sessionmaker
from sup.targets.registry import TARGET_NAMES

TARGET_HELP = f"only this target ({', '.join(TARGET_NAMES)}); repeat for several"


def plan(
    target: list[str] = typer.Option(None, "--target", help=TARGET_HELP),
    output: Format = output_option(),
    as_json: bool = typer.Option(False, "--json", help="the same as -o json"),
) -> None:
    """Show the changes a reconcile would make, target by target. Changes nothing. With -o json or
    yaml: the list of changes (a target that could not be planned is said on stderr)."""
    cli = context()
    cli.require_migrated()
    try:
        result = run_pass(cli.settings, make_sessionmaker(cli.engine), only=target or None)
    except ValueError as exc:
        fail(str(exc), Exit.USAGE)
    if print_data([c.as_json() for c in result.changes], chosen(output, as_json)):
        for t in result.targets:
            if t.error:
                err.print(f"{t.target}: {t.state} — {t.error}", highlight=False, markup=False)
    else:
        print_plan(result, out)
    if not result.ok:
        raise typer.Exit(int(Exit.TARGET_FAILED))


@contextmanager
def _progress(wanted: bool) -> Iterator[Callable[[str], None] | None]:
    """A progress bar over the pass's steps (the store read, then each target), on a terminal only."""
    if not wanted or not sys.stderr.isatty():
        yield None
        return
    from sup.cli.transfer import progress_bar

    steps = 1 + len(TARGET_NAMES)
    with progress_bar() as bar:
        task = bar.add_task("reconcile", total=steps)
        started = False

        def step(name: str) -> None:
            nonlocal started
            if started:
                bar.advance(task)
            started = True
            bar.update(task, description="reading the store" if name == "store" else f"target {name}")

        yield step


def reconcile(
    target: list[str] = typer.Option(None, "--target", help=TARGET_HELP),
    output: Format = output_option(),
    as_json: bool = typer.Option(False, "--json", help="the same as -o json"),
    force: bool = typer.Option(
        False,
        "--force",
        help="apply even when a guard refuses (max_deletions, max_suspensions, the window budgets); audited",
    ),
    wait: float = typer.Option(60.0, "--wait", help="seconds to wait for another running pass"),
) -> None:
    """Apply the plan: bring every enabled target in line with the store. With -o json or yaml: the
    pass (each target's state, counts and failures, and the changes made)."""
    fmt = chosen(output, as_json)
    cli = context()
    cli.require_migrated()
    try:
        with exclusive(cli.engine, "reconcile", timeout=wait), _progress(fmt is Format.table) as step:
            result = run_pass(
                cli.settings,
                make_sessionmaker(cli.engine),
                only=target or None,
                apply=True,
                force=force,
                progress=step,
                actor=cli.actor,
            )
    except LockTimeout as exc:
        fail(f"{exc}; another reconcile is running", Exit.CONFLICT)
    except ValueError as exc:
        fail(str(exc), Exit.USAGE)
    if not print_data(pass_json(result), fmt):
        print_plan(result, out, applied=True)
    if not result.ok:
        raise typer.Exit(int(Exit.TARGET_FAILED))
