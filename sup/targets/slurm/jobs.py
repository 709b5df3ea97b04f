"""Who still has jobs: the optional `slurm.running_jobs_command` of staged offboarding.

SUP reads Slurm through slurmdbd only. Whether a job still runs is best known where slurmctld is
(`squeue`), or from slurmdbd's job records (`sacct`): a site names the command that fits it. A
suspended user the command does not list has nothing left to finish, so their blocked associations
go before the deadline. A command that fails tells nothing: the deadline decides, as without one.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Mapping, Sequence

log = logging.getLogger(__name__)


def users_with_jobs(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> frozenset[str] | None:
    """The users the command lists (one per line, the first `|`-separated field), or None when it
    could not tell."""
    try:
        done = subprocess.run(  # noqa: S603 - an argv list from the settings, no shell
            list(argv), capture_output=True, text=True, env=dict(env), timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("slurm.running_jobs_command failed (%s): the offboarding deadline decides", exc)
        return None
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())[:300]
        log.warning(
            "slurm.running_jobs_command exited %s (%s): the offboarding deadline decides",
            done.returncode,
            said,
        )
        return None
    return frozenset(name for line in done.stdout.splitlines() if (name := line.split("|", 1)[0].strip()))
