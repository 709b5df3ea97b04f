"""How the framework opens a target: it finds the spec, builds the TargetContext (the settings section,
a writer lock backed by the store's named lock, a clock, a logger) and calls the spec's factory. No
target opens the store itself."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Engine

from sup.config import Settings
from sup.store.locks import exclusive
from sup.targets.base import Target, TargetError
from sup.targets.spec import LockFactory, TargetContext, TargetSpec

# (target name, context) -> an open target. Tests pass their own to keep the targets they open.
TargetOpener = Callable[[str, TargetContext[Any]], Target[Any, Any]]


def store_lock(engine: Engine | None) -> LockFactory:
    """Named writer locks shared by every SUP process of the store behind `engine` (sup/store/locks.py).
    Without an engine (a context that only reads, e.g. adoption) taking one is an error."""

    def lock(name: str, timeout: float) -> AbstractContextManager[None]:
        if engine is None:
            raise TargetError(f"no writer lock {name!r} here: this target was opened only to read")
        return exclusive(engine, name, timeout=timeout)

    return lock


def target_context(spec: TargetSpec[Any], settings: Settings, engine: Engine | None) -> TargetContext[Any]:
    """The context of an enabled target; TargetError if its settings section is absent."""
    section = settings.target_settings(spec)
    if section is None:
        raise TargetError(f"the {spec.name} target is not configured (settings key `{spec.name}`)")
    return TargetContext(
        settings=section, lock=store_lock(engine), log=logging.getLogger(f"sup.targets.{spec.name}")
    )
