"""The Slurm target from SUP's Helm chart, for tests that install or render the chart: the values that
turn it on (`slurm_values`), the two objects a site creates first in the release's namespace
(`create_slurm_objects`: the ConfigMap with slurm.conf and the Secret with the munge key), under the
names those values use, and a Slurm cluster of the test slurmdbd prepared as a site prepares its own
for SUP (`site_slurm`). docs/slurm.md describes the same steps for an operator."""

from __future__ import annotations

import base64
import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests.support.kubeapi import Admin, collection
from tests.support.slurmdbd import SUP_USER, SlurmdbdServer

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


@dataclass(frozen=True)
class SiteSlurm:
    """A cluster of its own in the test slurmdbd, for SUP installed from the chart: `slurm_conf` is
    what SUP's pod reads (slurmdbd at the address given, munge's default socket), `munge_key` what
    its sidecar's munged holds."""

    slurmdbd: SlurmdbdServer
    cluster: str
    slurm_conf: str

    @property
    def munge_key(self) -> bytes:
        return self.slurmdbd.munge_key

    def associations(self) -> set[tuple[str, str]]:
        """(account, user) of every user association on the cluster, as `sacctmgr show` on the host
        sees them."""
        rows = self.slurmdbd.show("associations", f"cluster={self.cluster}", "format=Account,User")
        return {(account, user) for account, user in rows if user}


@contextlib.contextmanager
def site_slurm(slurmdbd: SlurmdbdServer, address: str) -> Iterator[SiteSlurm]:
    """A new cluster registered in `slurmdbd`, reached at `address` (the host's address on the pod
    bridge), where SUP's uid (slurmdbd knows it as SUP_USER) is a Slurm Operator: what SECURITY.md
    says SUP's identity needs. Removed at the end, with what SUP wrote there."""
    cluster = f"chart{uuid.uuid4().hex[:6]}"
    accounts = {row[0] for row in slurmdbd.show("account", "format=Account")}
    slurmdbd.sacctmgr("add", "cluster", cluster)
    try:
        slurmdbd.sacctmgr(
            "add", "user", SUP_USER, "account=root", f"cluster={cluster}", "adminlevel=Operator"
        )
        yield SiteSlurm(slurmdbd, cluster, slurmdbd.client_conf(address, cluster))
    finally:
        with contextlib.suppress(RuntimeError):
            slurmdbd.sacctmgr("delete", "cluster", cluster)
        created = {row[0] for row in slurmdbd.show("account", "format=Account")} - accounts
        with contextlib.suppress(RuntimeError):
            if created:
                slurmdbd.sacctmgr("delete", "account", "where", "name=" + ",".join(sorted(created)))


@contextlib.contextmanager
def jobs_cluster_slurm(slurmdbd: SlurmdbdServer, cluster: str, address: str) -> Iterator[SiteSlurm]:
    """Like site_slurm, on an existing cluster of `slurmdbd` (one whose slurmctld runs jobs, so that
    the people SUP provisions from the chart run them): SUP's uid an Operator there for the block,
    the accounts SUP created and that Operator removed at the end."""
    accounts = {row[0] for row in slurmdbd.show("account", "format=Account")}
    slurmdbd.sacctmgr("add", "user", SUP_USER, "account=root", f"cluster={cluster}", "adminlevel=Operator")
    try:
        yield SiteSlurm(slurmdbd, cluster, slurmdbd.client_conf(address, cluster))
    finally:
        created = {row[0] for row in slurmdbd.show("account", "format=Account")} - accounts
        with contextlib.suppress(RuntimeError):
            if created:
                slurmdbd.sacctmgr("delete", "account", "where", "name=" + ",".join(sorted(created)))
        with contextlib.suppress(RuntimeError):
            slurmdbd.sacctmgr("delete", "user", "where", f"name={SUP_USER}", f"cluster={cluster}")
