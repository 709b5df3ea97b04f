"""One pass (`sync`): the login files -> wanted homes -> what the disk holds -> plan -> act, with
logs and counts; and `serve`: a pass on start, on every change the watch reports (a second or two
after SUP writes a new person's ConfigMap) and every `resync_seconds`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from sup.config.home_dirs import HomeDirsSettings
from sup.home_dirs import disk, metrics, quota
from sup.home_dirs.plan import needs_orphans, plan
from sup.home_dirs.wanted import Home, Refusal, wanted

log = logging.getLogger("sup.home_dirs")

BACKOFF_SECONDS = (1.0, 30.0)


@dataclass
class Outcome:
    made: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    homes: int = 0  # homes that are their person's now

    def counts(self) -> dict[str, int]:
        return {
            "made": len(self.made),
            "fixed": len(self.fixed),
            "moved": len(self.moved),
            "refused": len(self.refused),
            "homes": self.homes,
        }


@dataclass
class Memo:
    """What a process remembers between passes: the uids whose limit is set, at which size."""

    limited: dict[int, int] = field(default_factory=dict)
    reported: set[tuple[str, str]] = field(default_factory=set)


def sync(settings: HomeDirsSettings, files: Mapping[str, str], memo: Memo | None = None) -> Outcome:
    """One pass over every wanted home (module docstring). Refusals are returned and counted; the
    caller logs them. Raises OSError when the mount cannot be opened."""
    memo = memo if memo is not None else Memo()
    want = wanted(files, settings.home_root)
    outcome = Outcome(refused=list(want.refused))
    with disk.mount_fd(settings.mount) as root:
        entries = disk.observe(root, sorted(want.homes))
        orphans = (
            disk.scan_orphans(root, want.taken, want.depth) if needs_orphans(want.homes, entries) else {}
        )
        steps = plan(want.homes, entries, orphans)
        outcome.refused += steps.refuse
        good = list(steps.keep)
        for home in steps.make:
            if _act(outcome, home.path, partial(disk.make, root, home)):
                outcome.made.append(home.path)
                good.append(home)
                log.info("made home %s for %s (uid %d)", home.path, ", ".join(home.names), home.uid)
        for home in steps.fix:
            if _act(outcome, home.path, partial(disk.fix, root, home)):
                outcome.fixed.append(home.path)
                good.append(home)
                log.info("fixed home %s for %s: handed the empty root-owned directory to uid %d",
                         home.path, ", ".join(home.names), home.uid)  # fmt: skip
        for step in steps.move:
            source = "/".join(step.source)
            if _act(outcome, step.home.path, partial(disk.move, root, step.home, step.source)):
                outcome.moved.append(step.home.path)
                good.append(step.home)
                log.info("moved home %s to %s for %s (uid %d)",
                         source, step.home.path, ", ".join(step.home.names), step.home.uid)  # fmt: skip
        if settings.quota == "xfs":
            good = _quotas(settings, root, good, memo, outcome)
        outcome.homes = len(good)
    for name in ("made", "fixed", "moved"):
        metrics.ACTIONS.labels(name).inc(len(getattr(outcome, name)))
    metrics.REFUSED.set(len(outcome.refused))
    metrics.HOMES.set(outcome.homes)
    return outcome


def _act(outcome: Outcome, path: str, step: Callable[[], None]) -> bool:
    try:
        step()
    except (disk.Refused, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        outcome.refused.append(Refusal(path, f"not done: {reason}"))
        return False
    return True


def _quotas(
    settings: HomeDirsSettings, root: int, homes: list[Home], memo: Memo, outcome: Outcome
) -> list[Home]:
    """Each home's project and limit; the homes that have both (a refusal for each other)."""
    size = settings.size_bytes
    done: list[Home] = []
    for home in homes:
        try:
            if quota.project(root, home):
                memo.limited.pop(home.uid, None)
        except (disk.Refused, OSError) as exc:
            outcome.refused.append(Refusal(home.path, f"its project quota could not be set: {exc}"))
            continue
        done.append(home)
    pending = [h.uid for h in done if memo.limited.get(h.uid) != size]
    if pending:
        quota.limit(settings.mount, pending, size)
        memo.limited.update(dict.fromkeys(pending, size))
        log.info("set the quota of %d home(s) to %s", len(pending), settings.size)
    return done


def report(outcome: Outcome, memo: Memo, *, every: bool) -> None:
    """Log the refusals: each once per process (`every`: all of them, as `sync --once` does)."""
    seen: set[tuple[str, str]] = set()
    for refusal in outcome.refused:
        key = (refusal.what, refusal.reason)
        seen.add(key)
        if every or key not in memo.reported:
            log.warning("refused %s: %s", refusal.what, refusal.reason)
            metrics.ACTIONS.labels("refused").inc()
    memo.reported = seen


class Source(Protocol):
    """The login files (source.ConfigMaps; tests pass a fake)."""

    def list(self) -> tuple[dict[str, str], str]: ...

    def watch(self, version: str, seconds: int) -> Iterator[tuple[str, dict[str, Any]]]: ...


class Server:
    """`sup homes serve`: list, pass, watch; a pass per change and a full one every resync."""

    def __init__(self, settings: HomeDirsSettings, source: Source) -> None:
        self.settings = settings
        self.source = source
        self.files: dict[str, str] = {}
        self.memo = Memo()
        self.stop = threading.Event()

    def pass_(self, trigger: str) -> None:
        metrics.PASSES.labels(trigger).inc()
        try:
            outcome = sync(self.settings, self.files, self.memo)
        except (OSError, quota.QuotaError) as exc:
            metrics.ERRORS.labels("pass").inc()
            log.error("the pass failed: %s", exc)
            return
        report(outcome, self.memo, every=False)
        if outcome.made or outcome.fixed or outcome.moved:
            log.info("pass (%s): %s", trigger, outcome.counts())

    def run(self) -> None:
        backoff = BACKOFF_SECONDS[0]
        while not self.stop.is_set():
            try:
                self.files, version = self.source.list()
                self.pass_("list")
                self._follow(version)
                backoff = BACKOFF_SECONDS[0]
            except Exception as exc:  # a broken watch or an unreachable API server: list again
                if self.stop.is_set():
                    return
                metrics.ERRORS.labels("watch").inc()
                log.warning("the ConfigMap watch broke: %s; listing again in %.0f s", exc, backoff)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_SECONDS[1])

    def _follow(self, version: str) -> None:
        """Watch from `version` until the API server ends the watch after resync_seconds; the caller
        then lists again and makes a full pass (which also repairs what changed on disk meanwhile)."""
        dirty = False
        for kind, body in self.source.watch(version, max(1, int(self.settings.resync_seconds))):
            if self.stop.is_set():
                return
            name = str((body.get("metadata") or {}).get("name") or "")
            if kind == "DELETED":
                dirty |= self.files.pop(name, None) is not None
            elif kind in ("ADDED", "MODIFIED"):
                text = (body.get("data") or {}).get("passwd")
                if isinstance(text, str) and self.files.get(name) != text:
                    self.files[name] = text
                    dirty = True
            if dirty:
                self.pass_("watch")
                dirty = False
