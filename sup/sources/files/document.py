"""Reading an import file into typed records, each remembering where it came from.

CSV (header described in docs/import.md): `username,email,display_name,groups`, optional `uid_number`,
`login_shell`, `ssh_public_keys`; lists inside a cell are separated by `;`. YAML or JSON: a mapping
with `users`, `groups` and `slurm_accounts` lists, each entry in the shape of the API's create body
(the shape `sup export` writes). Every record is checked with the API's own schemas, so a value the
API refuses is refused here too, and every problem names its line (CSV) or path (YAML/JSON).

A record sets only the fields it has (its CSV columns, its YAML keys): an import changes those and
leaves the rest of an existing object as it is.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from sup.groups.schemas import GroupCreate
from sup.slurm_accounts.schemas import SlurmAccountCreate
from sup.users.schemas import UserCreate

Kind = Literal["user", "group", "slurm_account"]
T = TypeVar("T", bound=BaseModel)

CSV_REQUIRED = ("username", "email", "display_name", "groups")
CSV_OPTIONAL = ("uid_number", "login_shell", "ssh_public_keys")
CSV_LISTS = frozenset({"groups", "ssh_public_keys"})
SECTIONS: dict[str, tuple[Kind, type[BaseModel], str]] = {
    "users": ("user", UserCreate, "username"),
    "groups": ("group", GroupCreate, "name"),
    "slurm_accounts": ("slurm_account", SlurmAccountCreate, "name"),
}
FORMATS = ("csv", "yaml", "json")
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class FileError(Exception):
    """The file as a whole cannot be read (missing, not CSV/YAML/JSON, wrong header or top level)."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input, at a line (`line 12`) or path (`users[3]`)."""

    where: str
    message: str
    field: str | None = None
    kind: Kind | None = None
    name: str | None = None

    def __str__(self) -> str:
        at = f"{self.where}: {self.field}" if self.field else self.where
        return f"{at}: {self.message}"

    def as_json(self) -> dict[str, Any]:
        return {
            "where": self.where,
            "field": self.field,
            "message": self.message,
            "kind": self.kind,
            "name": self.name,
        }


@dataclass(frozen=True)
class Record(Generic[T]):
    spec: T
    where: str
    fields: frozenset[str]  # the fields this record sets

    def has(self, name: str) -> bool:
        return name in self.fields


@dataclass
class Document:
    users: list[Record[UserCreate]] = field(default_factory=list)
    groups: list[Record[GroupCreate]] = field(default_factory=list)
    accounts: list[Record[SlurmAccountCreate]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.users) + len(self.groups) + len(self.accounts)


def format_of(path: Path, explicit: str | None = None) -> str:
    fmt = (explicit or path.suffix.lstrip(".")).lower()
    fmt = {"yml": "yaml"}.get(fmt, fmt)
    if fmt not in FORMATS:
        raise FileError(f"{path.name}: cannot tell the format from the extension; use .csv, .yaml or .json")
    return fmt


def read_file(path: Path, explicit_format: str | None = None) -> Document:
    fmt = format_of(path, explicit_format)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError as exc:
        raise FileError(f"{path}: no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise FileError(f"{path}: cannot read it ({exc})") from exc
    return parse_csv(text) if fmt == "csv" else parse_mapping(_load_structured(text, fmt))


def read_files(paths: list[Path], explicit_format: str | None = None) -> Document:
    """Several files as one document (e.g. groups and accounts in YAML, people in CSV): checked and
    imported together. With more than one file, each place names its file (`people.csv: line 3`)."""
    if len(paths) == 1:
        return read_file(paths[0], explicit_format)
    whole = Document()
    for path in paths:
        try:
            doc = read_file(path, explicit_format)
        except FileError as exc:
            raise FileError(f"{path.name}: {exc}") from exc
        whole.users += [replace(r, where=f"{path.name}: {r.where}") for r in doc.users]
        whole.groups += [replace(r, where=f"{path.name}: {r.where}") for r in doc.groups]
        whole.accounts += [replace(r, where=f"{path.name}: {r.where}") for r in doc.accounts]
        whole.problems += [replace(p, where=f"{path.name}: {p.where}") for p in doc.problems]
    return whole


def _load_structured(text: str, fmt: str) -> Any:
    try:
        # libyaml's loader when present: ten times faster on a 10,000-user document.
        return json.loads(text) if fmt == "json" else yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506
    except json.JSONDecodeError as exc:
        raise FileError(f"line {exc.lineno}: not valid JSON: {exc.msg}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise FileError(f"{where}not valid YAML: {getattr(exc, 'problem', None) or exc}") from exc


# --- CSV -------------------------------------------------------------------------------------------


def parse_csv(text: str) -> Document:
    reader = csv.DictReader(io.StringIO(text, newline=""), restkey="\0extra")
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in CSV_REQUIRED if c not in header]
    unknown = [c for c in header if c not in CSV_REQUIRED + CSV_OPTIONAL]
    if missing or unknown:
        wanted = ",".join(CSV_REQUIRED) + " (optional: " + ", ".join(CSV_OPTIONAL) + ")"
        said = "; ".join(
            part
            for part in (
                f"missing column(s) {', '.join(missing)}" if missing else "",
                f"unknown column(s) {', '.join(unknown)}" if unknown else "",
            )
            if part
        )
        raise FileError(f"line 1: {said}; the header is {wanted}")
    reader.fieldnames = header
    doc = Document()
    for row in reader:
        where = f"line {reader.line_num}"
        if "\0extra" in row:
            doc.problems.append(Problem(where, f"more cells than the header's {len(header)}", kind="user"))
            continue
        if all(not (v or "").strip() for v in row.values()):
            continue  # blank line
        data: dict[str, Any] = {}
        for column, raw in row.items():
            value = (raw or "").strip()
            if column in CSV_LISTS:
                data[column] = [part.strip() for part in value.split(";") if part.strip()]
            else:
                data[column] = value or None
        _validate(doc, doc.users, UserCreate, data, where, "user", "username")
    return doc


# --- YAML / JSON -----------------------------------------------------------------------------------


def parse_mapping(loaded: Any) -> Document:
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise FileError("the document must be a mapping with users, groups and slurm_accounts lists")
    unknown = sorted(str(k) for k in loaded if k not in SECTIONS)
    if unknown:
        raise FileError(
            f"unknown top-level key(s) {', '.join(unknown)}; expected users, groups, slurm_accounts"
        )
    doc = Document()
    targets: dict[str, list[Any]] = {"users": doc.users, "groups": doc.groups, "slurm_accounts": doc.accounts}
    for section, (kind, model, key) in SECTIONS.items():
        entries = loaded.get(section) or []
        if not isinstance(entries, list):
            raise FileError(f"{section}: must be a list")
        for index, entry in enumerate(entries):
            where = f"{section}[{index}]"
            if not isinstance(entry, dict):
                doc.problems.append(Problem(where, "must be a mapping", kind=kind))
                continue
            _validate(doc, targets[section], model, entry, where, kind, key)
    return doc


def _validate(
    doc: Document,
    into: list[Any],
    model: type[BaseModel],
    data: dict[str, Any],
    where: str,
    kind: Kind,
    key: str,
) -> None:
    name = data.get(key) if isinstance(data.get(key), str) else None
    try:
        spec = model.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors(include_url=False, include_input=False):
            loc = ".".join(str(p) for p in error["loc"]) or None
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "unknown field"
            doc.problems.append(Problem(where, message, field=loc, kind=kind, name=name))
        return
    into.append(Record(spec, where, frozenset(data)))


def names(records: Iterable[Record[Any]], key: str) -> list[str]:
    return [getattr(r.spec, key) for r in records]
