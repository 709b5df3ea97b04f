"""What a target package exports: one `TargetSpec` (its name, settings model, factory and what it can
do), and the `TargetContext` the framework hands the factory.

A spec module must stay light to import: `sup.config` reads every registered spec to compose the
settings, so a spec holds the settings model and a factory that imports the heavy modules (ldap3, the
Kubernetes client) only when the target is opened. sup/targets/registry.py lists the specs.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:
    from sup.domain.desired import DesiredState
    from sup.targets.adoption import Adoption
    from sup.targets.base import Scope, Target

S = TypeVar("S", bound=BaseModel)

# A capability a target provides to others (TargetSpec.provides / .needs): the users' POSIX identity
# in the directory that login and compute nodes read.
POSIX_IDENTITY = "posix-identity"

# lock(name, timeout_seconds): a context manager holding the named writer lock, shared by every SUP
# process of the same store (other replicas too); raises sup.common.locks.LockTimeout when it is not
# free within the timeout.
LockFactory = Callable[[str, float], AbstractContextManager[None]]


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class TargetContext(Generic[S]):
    """What the framework gives a target when it opens it: its settings section, a cross-process
    writer lock (no target opens the store itself), a clock (injectable in tests) and a logger."""

    settings: S
    lock: LockFactory
    clock: Callable[[], datetime.datetime] = _utcnow
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("sup.targets"))


@dataclass(frozen=True)
class TargetSpec(Generic[S]):
    """One target, self-described.

    name          the settings key (`SUP_<NAME>__*`, YAML `<name>:`) and the name in plans and statuses
    settings_model the pydantic model of that section; an absent section disables the target
    open          the factory: connects (or raises TargetError saying why it cannot)
    can_scope     (settings, scope, desired) -> whether a pass may read and plan only the scope's users
                  and groups (`observe(scope)`, `diff(..., scope)`); None: the target always reads all
    adopt         hook of `sup import --from-<name>`: read the target into an Adoption; None: cannot
    privileged_groups  settings -> the groups whose members the target gives power (sudo, an admin
                  level): only sources in sources.privileged_group_writers may create or fill them
                  (sup/domain/privilege.py); None: the target makes no group privileged
    provides      capabilities it provisions for other targets (POSIX_IDENTITY: the LDAP target)
    needs         capabilities that must exist before it creates something for a user: when an enabled
                  target provides one, the planner applies that target first and tells this one which
                  users are not provisioned there yet (DesiredState.identity_pending)
    reserved_uids settings -> uids the target runs its own processes as (the Kubernetes target's munge
                  sidecar): the settings refuse a uid range of SUP's (ids.uid_range,
                  ids.supplied_uid_ranges) that holds one, since a person could get that uid
    """

    name: str
    settings_model: type[S]
    open: Callable[[TargetContext[S]], Target[Any, Any]]
    can_scope: Callable[[S, Scope, DesiredState], bool] | None = None
    adopt: Callable[[TargetContext[S], Adoption], None] | None = None
    privileged_groups: Callable[[S], frozenset[str]] | None = None
    provides: frozenset[str] = frozenset()
    needs: frozenset[str] = frozenset()
    reserved_uids: Callable[[S], frozenset[int]] | None = None
