"""Running sacctmgr: argv lists (never a shell), `-i` always, `-n -P` reads, outcomes classified.

Exit codes alone do not tell what happened: harmless no-ops exit 1 just like real errors, and their
texts changed between releases (22.05: " Nothing new added.", 23.11+: "Request didn't affect
anything" / "Nothing added."). So a write ends in one of three outcomes:
- OK: exit 0;
- NOOP: exit 1 with a known "nothing changed" text and nothing on stderr: probably already done;
- ERROR: anything else (with sacctmgr's message).
Callers treat NOOP and ERROR as ambiguous and re-read the state to decide what really holds.
A write that cannot reach slurmdbd at all raises `SlurmUnreachable`: going on would only fail again.
"""

from __future__ import annotations

import enum
import logging
import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sup.targets.base import ObserveError, TargetError

log = logging.getLogger(__name__)

# What sacctmgr prints when a write changed nothing, across 22.05 .. 24.x.
NOOP_TEXTS = (
    "nothing new added",
    "nothing added",
    "request didn't affect anything",
    "nothing deleted",
    "nothing removed",
    "nothing modified",
)
# Texts that mean slurmdbd (or munge, or its database) is not reachable: stop, do not retry per item.
UNREACHABLE = re.compile(
    r"connection refused|persistent connection|problem talking to the database|munge (en|de)code failed"
    r"|unable to (contact|connect)|authentication error|slurmdbd.*(down|not responding)",
    re.IGNORECASE,
)


class Outcome(enum.Enum):
    OK = "ok"
    NOOP = "noop"
    ERROR = "error"


class SlurmUnreachable(TargetError):
    """slurmdbd could not be reached: the pass stops for this target."""


@dataclass(frozen=True)
class Result:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    outcome: Outcome
    seconds: float

    @property
    def message(self) -> str:
        """What sacctmgr said, on one line, for error reports (stderr first: that is where errors go)."""
        text = " ".join((self.stderr.strip() + " " + self.stdout.strip()).split())
        return text[:500] or f"sacctmgr exited with {self.returncode}"


def classify(returncode: int, stdout: str, stderr: str) -> Outcome:
    if returncode == 0:
        return Outcome.OK
    said = stdout.lower()
    if not stderr.strip() and any(text in said for text in NOOP_TEXTS):
        return Outcome.NOOP
    return Outcome.ERROR


class Sacctmgr:
    """One sacctmgr binary with its environment (SLURM_CONF passes through) and a timeout."""

    def __init__(self, path: str, timeout: float, env: Mapping[str, str] | None = None) -> None:
        self.path = path
        self.timeout = timeout
        base = dict(os.environ if env is None else env)
        base["LC_ALL"] = "C"  # the texts we classify are the untranslated ones
        self.env = base
        self.writes = 0  # counted for tests and benchmarks: a pass without drift makes none
        self.reads = 0  # (reads may run in parallel threads: an approximate count is enough)

    def _run(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(  # noqa: S603 - an argv list, no shell; the path is a setting
                [self.path, *argv],
                capture_output=True,
                text=True,
                env=self.env,
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError as exc:
            raise TargetError(
                f"sacctmgr not found at {self.path!r} (setting slurm.sacctmgr)", terminal=True
            ) from exc
        except PermissionError as exc:
            raise TargetError(f"sacctmgr at {self.path!r} is not executable", terminal=True) from exc

    def show(
        self, entity: str, fields: Sequence[str], *, where: Sequence[str] = (), extra: Sequence[str] = ()
    ) -> str:
        """`sacctmgr -n -P show ENTITY [extra] [where ...] format=...`: the raw output.

        A read that fails or times out raises ObserveError: nothing may be decided from it.
        """
        argv = ["-n", "-P", "show", entity, *extra]
        if where:
            argv += ["where", *where]
        argv.append("format=" + ",".join(fields))
        self.reads += 1
        try:
            done = self._run(argv)
        except subprocess.TimeoutExpired as exc:
            raise ObserveError(f"sacctmgr show {entity} timed out after {self.timeout:.0f} s") from exc
        if done.returncode != 0:
            said = " ".join((done.stderr or done.stdout).split())[:500]
            raise ObserveError(f"sacctmgr show {entity} failed (exit {done.returncode}): {said}")
        return done.stdout

    def write(self, argv: Sequence[str]) -> Result:
        """One write, always with `-i` (without it sacctmgr waits 30 s for a confirmation, then discards)."""
        full = ("-i", *argv)
        self.writes += 1
        started = time.monotonic()
        try:
            done = self._run(full)
        except subprocess.TimeoutExpired:
            elapsed = time.monotonic() - started
            log.warning("sacctmgr %s timed out after %.0f s", " ".join(argv[:2]), elapsed)
            return Result(full, -1, "", f"timed out after {elapsed:.0f} s", Outcome.ERROR, elapsed)
        elapsed = time.monotonic() - started
        outcome = classify(done.returncode, done.stdout, done.stderr)
        result = Result(full, done.returncode, done.stdout, done.stderr, outcome, elapsed)
        log.debug("sacctmgr %s -> %s in %.2f s", " ".join(argv[:2]), outcome.value, elapsed)
        if outcome is Outcome.ERROR and UNREACHABLE.search(done.stderr + done.stdout):
            raise SlurmUnreachable(f"slurmdbd is not reachable: {result.message}")
        return result
