"""The Kubernetes target: per user a home volume and an isolated login pod; per group, optionally, a
shared login pod (the official `kubernetes` client, server-side apply).

target.py   KubeTarget: observe / diff / apply / close
names.py    DNS-1123 names and SUP's labels for any POSIX user or group name
render.py   Jinja2 templates (templates/*.yaml.j2 here) -> manifests (pure)
template_values.py  what a template may read, typed: the templates' interface (pure)
login_files.py  a login pod's passwd, group and keys files (its ConfigMap's data; pure)
pods.py     login pods stuck on an outdated template: which to read, which to replace (pure)
model.py    the values passed between them: wanted and observed objects
drift.py    what differs in the fields SUP sets (pure)
diff.py     wanted vs observed -> Changes, retention of home claims (pure)
observe.py  label-selected lists of the namespace
watch.py    the process's cache of the namespace fed by watches, which a full pass reads when it
            can trust it (sup serve)
apply.py    server-side apply and deletes, in dependency order
client.py   the narrow typed client on top of the official one
values.py   quantities, durations, DNS names, labels, CIDRs (no client import: settings use it)
settings.py KubeSettings (settings key `kube`); spec.py SPEC (what the registry lists, can_scope)
wake.py     wake one sleeping login pod at once (the SSH gateway's wake; replicas 1)

Public surface: SPEC, KubeSettings, KubeTarget, Owner (names and labels of an owner's objects),
wake_login, WakeError. KubeTarget and the wake are imported lazily, so validating settings
(values.py) does not load the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sup.targets.kube.names import Owner
from sup.targets.kube.settings import KubeSettings
from sup.targets.kube.spec import SPEC

if TYPE_CHECKING:
    from sup.targets.kube.target import KubeTarget
    from sup.targets.kube.wake import WakeError, wake_login

__all__ = ["SPEC", "KubeSettings", "KubeTarget", "Owner", "WakeError", "wake_login"]


def __getattr__(name: str) -> Any:
    if name == "KubeTarget":
        from sup.targets.kube.target import KubeTarget

        return KubeTarget
    if name in ("wake_login", "WakeError"):
        from sup.targets.kube import wake

        return getattr(wake, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
