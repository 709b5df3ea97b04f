"""How read and write commands print what they show: `-o table` (the default, for people), `-o json`
or `-o yaml` (for scripts: the API's own representation, so a script can switch between the CLI and
the API without re-mapping fields)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import typer
import yaml
from rich.table import Table

from sup.cli.common import out, print_json


class Format(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


def output_option() -> Any:
    """The `-o/--output` option every command that prints objects takes."""
    return typer.Option(Format.table, "-o", "--output", help="table, json or yaml", case_sensitive=False)


def chosen(output: Format, as_json: bool) -> Format:
    """`--json` (kept for scripts written before `-o`) means `-o json`."""
    return Format.json if as_json else output


def print_data(data: Any, output: Format) -> bool:
    """Print `data` (JSON-ready) as JSON or YAML and return True; False for `table` (the caller
    draws its own)."""
    if output is Format.json:
        print_json(data)
        return True
    if output is Format.yaml:
        plain = json.loads(json.dumps(data, default=str))  # what JSON would say: tuples, datetimes
        sys.stdout.write(yaml.safe_dump(plain, sort_keys=False, allow_unicode=True))
        return True
    return False


def print_fields(data: dict[str, Any]) -> None:
    """One object as a two-column table: each field and its value (lists one per line)."""
    table = Table("field", "value", show_header=False)
    for key, value in data.items():
        shown = "\n".join(str(v) for v in value) if isinstance(value, list) else str(value)
        table.add_row(key, shown)
    out.print(table)


def print_object(data: dict[str, Any], output: Format) -> None:
    if not print_data(data, output):
        print_fields(data)


def print_rows(rows: Sequence[dict[str, Any]], output: Format, columns: Sequence[tuple[str, str]]) -> None:
    """A listing: JSON/YAML of the whole rows, or a table of `columns` (header, field)."""
    if print_data(list(rows), output):
        return
    table = Table(*(header for header, _ in columns))
    for row in rows:
        table.add_row(*(_cell(row.get(field)) for _, field in columns))
    out.print(table)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)
