"""Rules for what SUP writes into Slurm accounting: account, QOS and partition names, limits.

sacctmgr stores names lower-case and splits its arguments on ',' and '=', and `sacctmgr -P` output is
'|'-separated, one line per record: values that contain those characters cannot round-trip, so they
are refused here rather than mangled later.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

# The patterns are matched against the whole value (re.fullmatch; pydantic's `pattern` does too):
# with `re.match`, `$` also accepts a trailing newline, and `root\n` would pass for an account name.
# Digits are ASCII digits ([0-9], not \d, which takes any Unicode digit that sacctmgr would not).
ACCOUNT_PATTERN = r"^[a-z0-9_][a-z0-9_.-]*$"
MAX_ACCOUNT_LENGTH = 64
QOS_PATTERN = r"^[a-z0-9_][a-z0-9_.-]*$"
PARTITION_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
# Slurm's built-in root of the account tree; SUP hangs its accounts below it and never manages it.
ROOT_ACCOUNT = "root"

_TRES_KEY = re.compile(
    r"^(cpu|mem|node|energy|billing|fs/disk|vmem|pages|(gres|license|bb|fs|ic)/[A-Za-z0-9_.:-]+)$"
)
_TRES_VALUE = re.compile(r"^([0-9]+)([KMGTP])?$")
# Slurm time formats: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds.
_SLURM_TIME = re.compile(r"^([0-9]+-[0-9]+(:[0-9]+){0,2}|[0-9]+(:[0-9]+){0,2})$")
_FORBIDDEN_TEXT = re.compile(r"[\x00-\x1f\x7f|\"']")


def check_account_name(name: str) -> str:
    if not name:
        raise ValueError("account name must not be empty")
    if len(name) > MAX_ACCOUNT_LENGTH:
        raise ValueError(f"account name is longer than {MAX_ACCOUNT_LENGTH} characters")
    if not re.fullmatch(ACCOUNT_PATTERN, name):
        raise ValueError(
            f"account name {name!r} is not valid; use lower-case letters, digits, '_', '.' and '-' "
            "(Slurm stores names lower-case)"
        )
    if name == ROOT_ACCOUNT:
        raise ValueError("'root' is Slurm's own top account and cannot be managed by SUP")
    return name


def check_slurm_text(value: str, what: str) -> str:
    """Descriptions and organizations: free text without line breaks, '|' or quotes."""
    if _FORBIDDEN_TEXT.search(value):
        raise ValueError(f"{what} must not contain line breaks, control characters, '|' or quotes")
    return value


def _check_tres(value: dict[str, str]) -> dict[str, str]:
    for key, amount in value.items():
        if not _TRES_KEY.fullmatch(key):
            raise ValueError(f"unknown TRES {key!r} (e.g. cpu, mem, node, gres/gpu, license/NAME)")
        if not _TRES_VALUE.fullmatch(str(amount)):
            raise ValueError(f"TRES {key} must be a whole number, optionally with K/M/G/T/P: got {amount!r}")
    return value


class SlurmLimits(BaseModel):
    """Association limits. A field left out means Slurm's default: no limit, or for the per-user
    limits (Max*) the parent account's value; the Slurm target clears a value set there by hand."""

    model_config = ConfigDict(extra="forbid")

    grp_tres: dict[str, str] | None = Field(
        None, description='GrpTRES, e.g. {"cpu": "512", "gres/gpu": "16"}'
    )
    max_tres_per_job: dict[str, str] | None = Field(None, description="MaxTRES (per job)")
    grp_jobs: int | None = Field(None, ge=0, description="GrpJobs")
    grp_submit_jobs: int | None = Field(None, ge=0, description="GrpSubmitJobs")
    max_jobs: int | None = Field(None, ge=0, description="MaxJobs (per user)")
    max_submit_jobs: int | None = Field(None, ge=0, description="MaxSubmitJobs (per user)")
    max_wall: str | None = Field(None, description="MaxWall, Slurm time format such as 2-00:00:00")
    grp_wall: str | None = Field(None, description="GrpWall, Slurm time format")

    @field_validator("grp_tres", "max_tres_per_job", mode="before")
    @classmethod
    def _tres(cls, value: object) -> object:
        if isinstance(value, dict):
            return _check_tres({str(k): str(v) for k, v in value.items()})
        return value

    @field_validator("max_wall", "grp_wall")
    @classmethod
    def _time(cls, value: str | None) -> str | None:
        if value is not None and not _SLURM_TIME.fullmatch(value):
            raise ValueError(f"{value!r} is not a Slurm time (minutes, H:M:S, D-H, D-H:M or D-H:M:S)")
        return value
