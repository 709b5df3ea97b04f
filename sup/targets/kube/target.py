"""KubeTarget: the Kubernetes target behind the common protocol (sup/targets/base.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar

from sup.domain.desired import DesiredState
from sup.targets.base import ApplyReport, Scope, TargetError
from sup.targets.kube import unchanged
from sup.targets.kube.apply import apply_changes
from sup.targets.kube.client import KubeClient
from sup.targets.kube.diff import plan
from sup.targets.kube.model import KubeChange, Observed
from sup.targets.kube.observe import observe, observe_users, watch_cache
from sup.targets.kube.render import Renderer, TemplateError
from sup.targets.kube.settings import KubeSettings
from sup.targets.spec import TargetContext


class KubeTarget:
    """Per-user homes and login pods, per-group login pods, in one namespace, as the store says.

    Opening it loads the templates (a broken one is a TargetError before anything is read) and the
    connection settings; `diff` is pure; the context's clock decides home-claim retention.
    """

    name: ClassVar[str] = "kube"

    def __init__(self, context: TargetContext[KubeSettings], *, client: KubeClient | None = None) -> None:
        self.settings: KubeSettings = context.settings
        try:
            self.renderer = Renderer(self.settings)
        except TemplateError as exc:
            raise TargetError(str(exc), terminal=True) from None
        self.client = client if client is not None else KubeClient(self.settings)
        self.now = context.clock
        self.watch = watch_cache(self.settings)  # process-level, outlives this target (watch.py)

    def observe(self, scope: Scope | None = None) -> Observed:
        """The namespace (or the scope's users' objects). A full observe may answer a hollow
        Observed (no objects) when nothing happened since a full pass that planned nothing: it is
        for `diff`, which reads the objects itself if it must plan after all (unchanged.py)."""
        if scope is not None:
            return observe_users(self.client, self.settings.field_manager, sorted(scope.users))
        kept = unchanged.kept_version(self.watch)
        return observe(self.client, self.settings.field_manager, self.watch, unchanged_since=kept)

    def diff(self, desired: DesiredState, observed: Observed, scope: Scope | None = None) -> list[KubeChange]:
        """With a scope: the scope's users' objects only; the others, and the group pods, are not
        looked at (and so never deleted); the scheduled full pass covers them."""
        if scope is not None:
            users = {name: user for name, user in desired.users.items() if name in scope.users}
            desired = replace(desired, users=users)
        now = self.now()
        fingerprint = self.renderer.fingerprint
        if scope is None and unchanged.nothing_again(self.watch, observed, fingerprint, desired, now):
            return []  # the last full pass planned nothing from these very inputs (unchanged.py)
        if observed.hollow:  # something else changed: read the objects after all
            observed = observe(self.client, self.settings.field_manager, self.watch)
        try:
            changes = plan(
                desired, observed, self.renderer, self.settings, now, include_group_pods=scope is None
            )
        except TemplateError as exc:
            raise TargetError(str(exc), terminal=True) from None
        if scope is None:
            unchanged.remember(
                self.watch, observed, fingerprint, desired, self.settings.pvc_retention, changes
            )
        return changes

    def apply(self, changes: Sequence[KubeChange]) -> ApplyReport:
        try:
            return apply_changes(self.client, self.settings.field_manager, changes, self.settings.workers)
        finally:
            if self.watch is not None:  # the next pass trusts the cache only once it shows these
                self.watch.note_writes(self.client.written, self.client.deleted)

    def close(self) -> None:
        self.client.close()
