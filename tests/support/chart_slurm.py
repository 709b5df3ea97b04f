"""The Slurm target from SUP's Helm chart, for tests that install or render the chart: the values that
turn it on (`slurm_values`) and the two objects a site creates first in the release's namespace
(`create_slurm_objects`: the ConfigMap with slurm.conf and the Secret with the munge key), under the
names those values use. docs/slurm.md describes the same steps for an operator."""

from __future__ import annotations

import base64
from typing import Any

from tests.support.kubeapi import Admin, collection

SLURM_CONF_MAP = "sup-slurm-conf"
MUNGE_KEY_SECRET = "sup-munge-key"


def slurm_values(cluster: str, **settings: Any) -> dict[str, Any]:
    """Chart values enabling the Slurm target for `cluster` (more `config.slurm` settings as keyword
    arguments), reading the ConfigMap and Secret `create_slurm_objects` makes. Merge into the rest of
    the values with `merge_values` (the `config` key is shared with other targets)."""
    return {
        "slurm": {
            "enabled": True,
            "slurmConf": {"configMap": SLURM_CONF_MAP, "key": "slurm.conf"},
            "mungeKey": {"secret": MUNGE_KEY_SECRET, "key": "munge.key"},
        },
        "config": {"slurm": {"cluster": cluster, **settings}},
    }


def merge_values(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`base` with `extra` merged in, dictionaries key by key (as helm merges values files)."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_values(merged[key], value)
        else:
            merged[key] = value
    return merged


def create_slurm_objects(admin: Admin, namespace: str, slurm_conf: str, munge_key: bytes) -> None:
    """The site's slurm.conf ConfigMap and munge key Secret in the release's namespace."""
    admin.create(
        collection(namespace, "configmaps"),
        {"metadata": {"name": SLURM_CONF_MAP}, "data": {"slurm.conf": slurm_conf}},
    )
    admin.create(
        collection(namespace, "secrets"),
        {
            "metadata": {"name": MUNGE_KEY_SECRET},
            "type": "Opaque",
            "data": {"munge.key": base64.b64encode(munge_key).decode()},
        },
    )
