"""The Slurm target's settings model (settings key `slurm`, env SUP_SLURM__*)."""

from __future__ import annotations

import datetime
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from sup.common.sections import Section

_SLURM_NAME = re.compile(r"^[a-z0-9_][a-z0-9_.-]*$")
AdminLevel = Literal["Operator", "Administrator"]
Offboarding = Literal["remove", "staged"]
_DURATION = re.compile(r"([0-9]+)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class SlurmSettings(Section):
    """The Slurm accounting target (settings key `slurm`); see docs/slurm.md.

    - Removals of associations and accounts count against `reconcile.max_deletions` (there is no
      second threshold): above it a pass stops with the count and the key unless `sup reconcile
      --force`.
    - Both writer locks are held for a whole apply: the flock in `lock_dir` (threads and processes on
      the host) and the store's named lock `slurmdbd:<host:port>` (replicas sharing a PostgreSQL
      store). Every SUP process writing to one slurmdbd must see the same `lock_dir` (or the same
      store).
    - `chunk_size` bounds the names in one call; one argument also stays under 100,000 characters.
    - Descriptions and organizations are compared ignoring case: Slurm 22.05 stores them lower-case.
    """

    cluster: str = Field(
        description="the cluster SUP provisions, as registered in slurmdbd (sacctmgr add cluster gpu)",
        examples=["gpu"],
    )
    sacctmgr: str = Field(
        "sacctmgr", description="path of sacctmgr; SLURM_CONF passes through from the environment"
    )
    clusters: list[str] = Field(
        default_factory=list,
        description="more clusters of the same slurmdbd; all get the same accounts",
    )
    ignore_accounts: list[str] = Field(
        default_factory=list, description="accounts SUP never changes (root always is)"
    )
    ignore_users: list[str] = Field(
        default_factory=list, description="users SUP never changes (root always is)"
    )
    admin_groups: dict[str, AdminLevel] = Field(
        default_factory=dict,
        description="group -> Slurm AdminLevel of its members; when set, SUP owns its users' AdminLevel "
        "(None for everybody else)",
        examples=[{"hpc-admins": "Administrator", "hpc-ops": "Operator"}],
    )
    user_fairshare: int | Literal["parent"] | None = Field(
        None,
        description="Fairshare of every user association, an integer or `parent`; null leaves it as "
        "Slurm has it",
    )
    prune_accounts: bool = Field(
        False,
        description="true: delete accounts below root that are not in the store (children first); false: "
        "only report them in `sup plan`",
    )
    offboarding: Offboarding = Field(
        "remove",
        description="what a suspension does to the user's associations: `remove` them at once "
        "(blocked first with MaxSubmitJobs=0, so a removal slurmdbd refuses while a job of theirs "
        "runs leaves them blocked), or `staged`: block new jobs and remove them after "
        "`offboarding_deadline`",
    )
    offboarding_deadline: str = Field(
        "7d",
        description="staged offboarding: how long after the suspension the blocked associations are "
        "removed (30d, 12h, 90m, 0s)",
    )
    running_jobs_command: list[str] | None = Field(
        None,
        description="staged offboarding: a command (argv) printing the users that still have jobs, "
        "one per line (first `|`-separated field); a suspended user it does not list is removed "
        "before the deadline. E.g. [sacct, -a, -L, -n, -P, -X, -s, 'R,PD,S,RQ', -o, User]",
    )
    chunk_size: int = Field(
        1000,
        ge=1,
        le=20000,
        description="names per sacctmgr call (measured by bench/slurm_bench.py: BENCHMARKS.md)",
    )
    command_timeout: float = Field(900.0, gt=0, description="seconds before a sacctmgr call is abandoned")
    lock_dir: str = Field(
        "/run/lock/sup",
        description="directory of the host-local writer lock, one file per slurmdbd (the chart: an "
        "emptyDir; docs/slurm.md)",
    )
    lock_timeout: float = Field(600.0, ge=0, description="seconds to wait for another slurmdbd writer")
    slurmdbd: str | None = Field(
        None,
        description="host:port naming the slurmdbd in lock names; default read from SLURM_CONF's "
        "AccountingStorageHost/Port",
    )

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: str) -> str:
        return _slurm_name(value, "cluster")

    @field_validator("clusters", "ignore_accounts", "ignore_users")
    @classmethod
    def _names(cls, values: list[str]) -> list[str]:
        for value in values:
            _slurm_name(value, "name")
        if len(set(values)) != len(values):
            raise ValueError("a name is listed twice")
        return values

    @field_validator("offboarding_deadline")
    @classmethod
    def _deadline(cls, value: str) -> str:
        parse_duration(value)
        return value

    @field_validator("sacctmgr", "lock_dir")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="after")
    def _no_repeated_cluster(self) -> SlurmSettings:
        if self.cluster in self.clusters:
            raise ValueError(f"cluster {self.cluster!r} is also listed in clusters")
        return self

    def all_clusters(self) -> list[str]:
        """The effective cluster list: `cluster` first, then `clusters`."""
        return [self.cluster, *self.clusters]

    def deadline(self) -> datetime.timedelta:
        """`offboarding_deadline` as a duration."""
        return parse_duration(self.offboarding_deadline)


def parse_duration(text: str) -> datetime.timedelta:
    """`30d`, `12h`, `90m`, `0s` -> that duration."""
    match = _DURATION.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration such as 7d, 12h, 90m or 0s")
    return datetime.timedelta(seconds=int(match.group(1)) * _UNIT[match.group(2)])


def _slurm_name(value: str, what: str) -> str:
    if not _SLURM_NAME.fullmatch(value):
        raise ValueError(
            f"{what} {value!r} is not a valid Slurm name (lower-case letters, digits, '_', '.', '-')"
        )
    return value
