"""Errors that cross layers.

Services raise these; the API turns them into problem+json responses (sup/api/errors.py) and the CLI
into exit codes (sup/cli/common.py). Each one names the field or resource at fault so the caller can
fix the input without guessing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One problem with one input field. `field` is a dotted path such as `ssh_public_keys.1`."""

    field: str
    message: str


class SupError(Exception):
    """Base class of every error SUP reports to a caller."""

    title = "Error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(SupError):
    """The request is well-formed but breaks a rule; nothing was written."""

    title = "Invalid input"

    def __init__(self, errors: list[FieldError] | FieldError) -> None:
        self.errors = errors if isinstance(errors, list) else [errors]
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in self.errors))


class NotFound(SupError):
    title = "Not found"

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"{kind} {name!r} does not exist")


class Conflict(SupError):
    """The request collides with existing state (a duplicate name or id, a dependent object)."""

    title = "Conflict"

    def __init__(self, message: str, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class Forbidden(SupError):
    """The caller (a source) may not make this change, whatever the values: e.g. fill a privileged
    group (sup/domain/privilege.py). Nothing was written."""

    title = "Forbidden"


class PreconditionFailed(SupError):
    """An If-Match (or version) did not match: someone else changed the object first."""

    title = "Precondition failed"


class ConfigurationError(SupError):
    """Settings or the database are not in a state SUP can work with."""

    title = "Configuration error"
