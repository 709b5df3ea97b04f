"""A target's context from the settings: its section, a logger, and the writer lock it is handed.

It lives with the settings, below both the planner (which opens targets to reconcile, with a writer
lock backed by the store, sup/reconcile/targets.py) and the file import (which opens them only to
read what a cluster holds, `sup import --from-ldap`): neither has to import the other for it.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from typing import Any

from sup.config.settings import Settings
from sup.targets.base import TargetError
from sup.targets.spec import LockFactory, TargetContext, TargetSpec


def no_lock(name: str, timeout: float) -> AbstractContextManager[None]:
    """The lock of a target opened only to read: taking one is an error."""
    raise TargetError(f"no writer lock {name!r} here: this target was opened only to read")


def target_context(
    spec: TargetSpec[Any], settings: Settings, lock: LockFactory = no_lock
) -> TargetContext[Any]:
    """The context of an enabled target; TargetError if its settings section is absent."""
    section = settings.target_settings(spec)
    if section is None:
        raise TargetError(f"the {spec.name} target is not configured (settings key `{spec.name}`)")
    return TargetContext(settings=section, lock=lock, log=logging.getLogger(f"sup.targets.{spec.name}"))
