"""KubeTarget: the Kubernetes target behind the common protocol (sup/targets/base.py)."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import ClassVar

from sup.config import KubeSettings, Settings
from sup.domain.desired import DesiredState
from sup.targets.base import ApplyReport, Change, Scope, TargetError
from sup.targets.kube.apply import apply_changes
from sup.targets.kube.client import KubeClient
from sup.targets.kube.diff import plan
from sup.targets.kube.model import Observed
from sup.targets.kube.observe import observe, observe_users
from sup.targets.kube.render import Renderer, TemplateError

Clock = Callable[[], datetime.datetime]


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class KubeTarget:
    """Per-user homes and login pods, per-group login pods, in one namespace, as the store says.

    Opening it loads the templates (a broken one is a TargetError before anything is read) and the
    connection settings; `diff` is pure; `now` is injectable for retention tests.
    """

    name: ClassVar[str] = "kube"

    def __init__(self, settings: Settings, *, client: KubeClient | None = None, now: Clock = _utcnow) -> None:
        if settings.kube is None:
            raise TargetError("the kube target is not configured (settings key `kube`)")
        self.settings: KubeSettings = settings.kube
        try:
            self.renderer = Renderer(self.settings)
        except TemplateError as exc:
            raise TargetError(str(exc)) from None
        self.client = client if client is not None else KubeClient(self.settings)
        self.now = now

    def observe(self) -> Observed:
        return observe(self.client, self.settings.field_manager)

    def diff(self, desired: DesiredState, observed: Observed) -> list[Change]:
        try:
            return plan(desired, observed, self.renderer, self.settings, self.now())
        except TemplateError as exc:
            raise TargetError(str(exc)) from None

    # --- passes scoped to a few users (planner.Scope) ---------------------------------------------------

    def can_scope(self, scope: Scope, desired: DesiredState) -> bool:
        """Whether a pass may read and plan only the scope's users: not when a group login pod, which
        mounts its members' homes, depends on what changed (then the whole namespace is read)."""
        if not self.settings.group_pods:
            return True
        pods = set(self.settings.group_pods)
        if scope.groups & pods:
            return False
        return not any(scope.users & desired.groups[g].members for g in pods if g in desired.groups)

    def observe_scoped(self, scope: Scope) -> Observed:
        return observe_users(self.client, self.settings.field_manager, sorted(scope.users))

    def diff_scoped(self, desired: DesiredState, observed: Observed, scope: Scope) -> list[Change]:
        """The scope's users' objects only: the others, and the group pods, are not looked at (and so
        never deleted); the scheduled full pass covers them."""
        users = {name: user for name, user in desired.users.items() if name in scope.users}
        settings = self.settings.model_copy(update={"group_pods": []})
        try:
            return plan(replace(desired, users=users), observed, self.renderer, settings, self.now())
        except TemplateError as exc:
            raise TargetError(str(exc)) from None

    def apply(self, changes: Sequence[Change]) -> ApplyReport:
        return apply_changes(self.client, self.settings.field_manager, changes, self.settings.workers)

    def close(self) -> None:
        self.client.close()
