"""Plans and pass results for people (a table) and for machines (JSON)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from sup.domain.status import PassState
from sup.reconcile.planner import Pass
from sup.targets.base import AnyDetails, Change

MAX_SHOWN = 120


def summarize(details: Mapping[str, Any]) -> str:
    """A one-line summary of a change's details for the table view."""
    parts = []
    for key, value in details.items():
        if isinstance(value, Mapping) and {"old", "new"} <= set(value):
            parts.append(f"{key}: {_short(value['old'])} -> {_short(value['new'])}")
        elif isinstance(value, list | tuple | set | frozenset):
            parts.append(f"{key}: {', '.join(_short(v) for v in value)}")
        else:
            parts.append(f"{key}: {_short(value)}")
    return "; ".join(parts)


def _short(value: Any, limit: int = 60) -> str:
    text = "-" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def print_plan(result: Pass, console: Console, *, applied: bool = False) -> None:
    for target in result.targets:
        line = f"{target.target}: {target.state}"
        if target.error:
            line += f" — {target.error}"
        elif target.state != PassState.DISABLED:
            line += f", {len(target.changes)} change(s)"
            if applied:
                line += f", {len(target.applied)} applied, {len(target.failed)} failed"
        console.print(line, highlight=False, markup=False)
    changes: list[Change[AnyDetails]] = result.changes
    if not changes:
        console.print("No changes.")
        return
    table = Table("target", "action", "kind", "name", "details")
    for change in changes[:MAX_SHOWN]:
        table.add_row(
            change.target, change.action, change.kind, change.name, summarize(change.details_json())
        )
    console.print(table)
    if len(changes) > MAX_SHOWN:
        console.print(f"... and {len(changes) - MAX_SHOWN} more (use --json for all)")
    for target in result.targets:
        for failure in target.failed[:MAX_SHOWN]:
            change = failure.change
            text = f"failed: {change.target} {change.action} {change.name}: {failure.error}"
            console.print(text, highlight=False, markup=False)


def pass_json(result: Pass) -> dict[str, Any]:
    return {
        "targets": [t.as_json() for t in result.targets],
        "changes": [c.as_json() for c in result.changes],
    }
