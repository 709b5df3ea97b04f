"""The Kubernetes target's spec: light to import (the settings model only); a site without Kubernetes
never loads the Kubernetes client, which is imported when the target is opened."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sup.domain.desired import DesiredState
from sup.targets.base import Scope
from sup.targets.kube.settings import KubeSettings
from sup.targets.spec import TargetContext, TargetSpec

if TYPE_CHECKING:
    from sup.targets.kube.target import KubeTarget


def _open(context: TargetContext[KubeSettings]) -> KubeTarget:
    from sup.targets.kube.target import KubeTarget

    return KubeTarget(context)


def can_scope(settings: KubeSettings, scope: Scope, desired: DesiredState) -> bool:
    """Whether a pass may read and plan only the scope's users: not when a group login pod, which
    mounts its members' homes, depends on what changed, nor when a shared group itself changed (a
    new name or gid: every member's login files list it); then the whole namespace is read.

    A shared group whose member list alone changed (a `members` mark) keeps the pass scoped: a
    user's login files list each of their groups with that user only, and the outbox names the
    users who joined or left. A private group changes with its user, whom the outbox names too."""
    if any(name in desired.groups and not desired.groups[name].private for name in scope.changed_groups):
        return False
    if not settings.group_pods:
        return True
    pods = set(settings.group_pods)
    if scope.groups & pods:
        return False
    return not any(scope.users & desired.groups[g].members for g in pods if g in desired.groups)


def reserved_uids(settings: KubeSettings) -> frozenset[int]:
    """munged's uid in the munge sidecar (when Slurm is configured): never a person's."""
    return frozenset({settings.munge_uid}) if settings.munge_key_secret else frozenset()


SPEC: TargetSpec[KubeSettings] = TargetSpec(
    name="kube",
    settings_model=KubeSettings,
    open=_open,
    can_scope=can_scope,
    reserved_uids=reserved_uids,
)
