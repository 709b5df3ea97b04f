"""Targets: LDAP, Slurm accounting, Kubernetes. Each lives in its own module behind sup/targets/base.py.

A target is enabled when its settings section is present. Modules are imported only when enabled, so
a site without Kubernetes never loads the Kubernetes client.
"""

from __future__ import annotations

import importlib
from typing import Any

from sup.config import TARGETS, Settings
from sup.targets.base import Target, TargetError

# target name -> "module:class"; a class takes the Settings and reads its own section.
IMPLEMENTATIONS: dict[str, str] = {
    "ldap": "sup.targets.ldap:LdapTarget",
    "slurm": "sup.targets.slurm:SlurmTarget",
    "kube": "sup.targets.kube:KubeTarget",
}


def open_target(name: str, settings: Settings) -> Target[Any]:
    """Connect to an enabled target, or raise TargetError saying why it cannot be used."""
    if name not in TARGETS:
        raise TargetError(f"unknown target {name!r}; targets are {', '.join(TARGETS)}")
    module_name, _, class_name = IMPLEMENTATIONS[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise TargetError(f"the {name} target is not available in this version of SUP") from exc
    target: Target[Any] = getattr(module, class_name)(settings)
    return target
