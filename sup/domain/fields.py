"""Annotated pydantic types shared by the API, the CLI and (later) importers and SCIM.

Each one carries its rule, so a bad value is refused where it enters, with the field's name.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints

from sup.domain import slurm
from sup.domain.posix import check_groupname, check_username
from sup.domain.sshkeys import parse_ssh_public_key

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def _plain_text(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters or line breaks")
    return value


def _email(value: str) -> str:
    if not _EMAIL.fullmatch(value) or _CONTROL.search(value):
        raise ValueError(f"{value[:80]!r} is not an email address")
    return value


def _absolute_path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError("must be an absolute path")
    if _CONTROL.search(value) or ":" in value:
        raise ValueError("must not contain ':' or control characters (it goes into passwd entries)")
    if any(part in (".", "..") for part in value.split("/")):
        raise ValueError("must not contain '.' or '..' components")
    return value


def _ssh_key(value: str) -> str:
    return parse_ssh_public_key(value).line


def _account(value: str) -> str:
    return slurm.check_account_name(value)


def _slurm_text(value: str) -> str:
    return slurm.check_slurm_text(value, "this text")


Username = Annotated[str, AfterValidator(check_username)]
GroupName = Annotated[str, AfterValidator(check_groupname)]
Email = Annotated[str, StringConstraints(max_length=254), AfterValidator(_email)]


DisplayName = Annotated[str, StringConstraints(max_length=256), AfterValidator(_plain_text)]
PersonName = Annotated[str, StringConstraints(max_length=128), AfterValidator(_plain_text)]
Description = Annotated[str, StringConstraints(max_length=1024), AfterValidator(_plain_text)]
ExternalId = Annotated[str, StringConstraints(min_length=1, max_length=256), AfterValidator(_plain_text)]
AbsolutePath = Annotated[str, StringConstraints(max_length=1024), AfterValidator(_absolute_path)]
SshKeyLine = Annotated[str, AfterValidator(_ssh_key)]
IdNumber = Annotated[int, Field(ge=1, le=4294967293)]
AccountName = Annotated[str, AfterValidator(_account)]
SlurmText = Annotated[str, StringConstraints(max_length=1024), AfterValidator(_slurm_text)]
QosName = Annotated[str, StringConstraints(max_length=64, pattern=slurm.QOS_PATTERN)]
PartitionName = Annotated[str, StringConstraints(max_length=64, pattern=slurm.PARTITION_PATTERN)]
