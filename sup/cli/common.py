"""What every CLI command shares: settings, the database, the acting identity, and exit codes.

Exit codes (stable; scripts may rely on them):
  0 success, 1 unexpected error, 2 usage error, 3 not found, 4 conflict (duplicate, in use),
  5 invalid input, 6 configuration or database not ready, 7 precondition failed,
  8 a target could not be planned or applied (unreachable, refused by a safety limit, failed changes).
"""

from __future__ import annotations

import getpass
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property
from typing import Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from sup.config import Settings, load_settings
from sup.errors import ConfigurationError, Conflict, InvalidInput, NotFound, PreconditionFailed, SupError
from sup.store.audit import Actor
from sup.store.migrate import current_revision, head_revision
from sup.store.session import make_engine, make_sessionmaker

err = Console(stderr=True)
out = Console()


class Exit(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    NOT_FOUND = 3
    CONFLICT = 4
    INVALID = 5
    NOT_READY = 6
    PRECONDITION = 7
    TARGET_FAILED = 8


_EXIT_FOR = {
    NotFound: Exit.NOT_FOUND,
    Conflict: Exit.CONFLICT,
    InvalidInput: Exit.INVALID,
    ConfigurationError: Exit.NOT_READY,
    PreconditionFailed: Exit.PRECONDITION,
}


def fail(message: str, code: Exit) -> NoReturn:
    err.print(f"[red]error:[/red] {message}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(int(code))


def settings_or_exit() -> Settings:
    """Load settings; report what is wrong without echoing values (they may be secrets)."""
    try:
        return load_settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_input=False)
        )
        fail(f"invalid settings: {problems}", Exit.NOT_READY)
    except FileNotFoundError as exc:
        fail(str(exc), Exit.NOT_READY)


@dataclass
class Cli:
    settings: Settings

    @cached_property
    def engine(self) -> Engine:
        return make_engine(self.settings.database_url)

    @property
    def actor(self) -> Actor:
        return Actor(name=f"cli:{_os_user()}", role="admin")

    def require_migrated(self) -> None:
        try:
            current = current_revision(self.engine)
        except OperationalError as exc:
            fail(f"cannot reach the database: {type(exc.orig).__name__}", Exit.NOT_READY)
        head = head_revision()
        if current != head:
            fail(
                f"the database schema is at {current or 'nothing'}, not {head}: run `sup db upgrade`",
                Exit.NOT_READY,
            )

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A transaction whose domain errors become messages and exit codes."""
        self.require_migrated()
        try:
            with make_sessionmaker(self.engine).begin() as session:
                yield session
        except SupError as exc:
            code = next((c for kind, c in _EXIT_FOR.items() if isinstance(exc, kind)), Exit.ERROR)
            fail(exc.message, code)


def context() -> Cli:
    return Cli(settings_or_exit())


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
