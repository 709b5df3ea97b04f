"""The Slurm target holds to the target contract (tests/support/target_contract.py)."""

from __future__ import annotations

from pathlib import Path

from tests.slurm import helpers as h
from tests.slurm.site import Site
from tests.support.target_contract import GROUP, TargetContract

FAIRSHARE = "10"

# A sacctmgr that answers every command but the association read, which fails as a slurmdbd that
# loses its database connection midway does: after the cluster, account and user reads went through.
BROKEN_SACCTMGR = """#!/bin/sh
case "$*" in
  *"show association"*) echo "sacctmgr: error: Problem talking to the database: lost connection" >&2; exit 1;;
esac
exec {real} "$@"
"""


class TestSlurmContract(TargetContract[Site]):
    read_error = ("sacctmgr show association failed (exit 1)",)

    def populate(self, site: Site) -> None:
        super().populate(site)
        site.add_account("phys", group=GROUP, fairshare=int(FAIRSHARE))

    def holds(self, site: Site, username: str) -> bool:
        return any(user == username for _, user, _ in site.associations())

    def snapshot(self, site: Site) -> object:
        return (
            site.rows(),
            h.users(site.slurmdbd),
            h.defaults(site.slurmdbd, site.cluster),
            h.coordinators(site.slurmdbd),
            site.transactions(),
        )

    def make_drift(self, site: Site) -> set[tuple[str, str, str]]:
        where = ["where", f"cluster={site.cluster}"]
        site.sacctmgr("modify", "account", *where, "name=phys", "set", "fairshare=5")
        site.sacctmgr("delete", "user", *where, "name=lalo", "account=phys")
        return {("update", "account", "phys"), ("create", "association", "phys/lalo")}

    def drift_repaired(self, site: Site) -> bool:
        return (
            site.accounts()["phys"]["Fairshare"] == FAIRSHARE and ("phys", "lalo", "") in site.associations()
        )

    def add_foreign(self, site: Site) -> None:
        """An account SUP does not know with its own user, and a user the settings tell SUP to
        ignore, inside SUP's account."""
        site.settings = site.with_settings(ignore_users=["svc-backup"])
        cluster = f"cluster={site.cluster}"
        site.sacctmgr("add", "account", "legacy", cluster, "fairshare=3")
        site.sacctmgr("add", "user", "stranger", "account=legacy", cluster)
        site.sacctmgr("add", "user", "svc-backup", "account=phys", cluster, "maxjobs=7")

    def foreign(self, site: Site) -> object:
        theirs = {"legacy", "stranger", "svc-backup"}
        rows = [row for row in site.rows() if row[0] in theirs or row[1] in theirs]
        users = {u: level for u, level in h.users(site.slurmdbd).items() if u in theirs}
        defaults = {u: d for u, d in h.defaults(site.slurmdbd, site.cluster).items() if u in theirs}
        return (rows, users, defaults) if rows else None

    def break_read(self, site: Site) -> None:
        path = Path(site.settings.slurm.lock_dir if site.settings.slurm else "").parent / "sacctmgr"
        path.write_text(BROKEN_SACCTMGR.format(real=site.slurmdbd.bin["sacctmgr"]))
        path.chmod(0o755)
        site.settings = site.with_settings(sacctmgr=str(path))
