"""How the framework opens a target to reconcile: the spec's factory gets the TargetContext
(sup/config/targets.py) with a writer lock backed by the store's named lock. No target opens the store
itself."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Engine

from sup.config.targets import no_lock
from sup.store.locks import exclusive
from sup.targets.base import Target
from sup.targets.spec import LockFactory, TargetContext

# (target name, context) -> an open target. Tests pass their own to keep the targets they open.
TargetOpener = Callable[[str, TargetContext[Any]], Target[Any, Any]]


def store_lock(engine: Engine | None) -> LockFactory:
    """Named writer locks shared by every SUP process of the store behind `engine` (sup/store/locks.py).
    Without an engine (a context that only reads) taking one is an error."""
    if engine is None:
        return no_lock

    def lock(name: str, timeout: float) -> AbstractContextManager[None]:
        return exclusive(engine, name, timeout=timeout)

    return lock
