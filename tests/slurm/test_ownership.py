"""What SUP owns in Slurm and what it never touches; safety on mass removals and bad reads."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.reconcile.planner import run_pass
from tests.slurm import helpers as h
from tests.slurm.site import Site
from tests.slurm.test_provisioning import plan, reconcile
from tests.support.slurmdbd import SlurmdbdServer


def _one_account(store: sessionmaker[Session], settings: Settings, *members: str) -> None:
    h.add_group(store, settings, "physics")
    for name in members:
        h.add_user(store, settings, name, "physics")
    h.add_account(store, "phys", group="physics")


def test_ignored_and_unknown_are_never_changed(
    store: sessionmaker[Session],
    slurm_settings: Callable[..., Settings],
    slurmdbd: SlurmdbdServer,
    cluster: str,
) -> None:
    settings = slurm_settings(ignore_users=["svc-backup"], ignore_accounts=["admin"])
    _one_account(store, settings, "kim")
    slurmdbd.sacctmgr("add", "account", "admin", f"cluster={cluster}")
    slurmdbd.sacctmgr("add", "account", "legacy", f"cluster={cluster}")
    slurmdbd.sacctmgr("add", "user", "svc-backup", "account=admin", f"cluster={cluster}")
    reconcile(settings, store)
    slurmdbd.sacctmgr("add", "user", "svc-backup", "account=phys", f"cluster={cluster}")
    slurmdbd.sacctmgr("modify", "account", "where", "name=admin", f"cluster={cluster}", "set", "fairshare=7")
    assert plan(settings, store) == [("report", "account", "legacy")]
    reconcile(settings, store)
    assert h.associations(slurmdbd, cluster) == {
        ("phys", "kim", ""),
        ("phys", "svc-backup", ""),  # an ignored user, even in SUP's account
        ("admin", "svc-backup", ""),
    }
    rows = h.accounts(slurmdbd, cluster)
    assert rows["admin"]["Fairshare"] == "7" and "legacy" in rows and "root" in rows


def test_prune_accounts_deletes_unknown_accounts_children_first(
    store: sessionmaker[Session],
    slurm_settings: Callable[..., Settings],
    slurmdbd: SlurmdbdServer,
    cluster: str,
) -> None:
    settings = slurm_settings(prune_accounts=True, ignore_accounts=["admin"])
    _one_account(store, settings, "kim")
    slurmdbd.sacctmgr("add", "account", "old", f"cluster={cluster}")
    slurmdbd.sacctmgr("add", "account", "old-child", "parent=old", f"cluster={cluster}")
    slurmdbd.sacctmgr("add", "account", "admin", f"cluster={cluster}")
    slurmdbd.sacctmgr("add", "user", "kim", "account=old-child", f"cluster={cluster}")
    assert plan(settings, store) == [
        ("create", "account", "phys"),
        ("create", "association", "phys/kim"),
        ("update", "user", "kim"),
        ("delete", "association", "old-child/kim"),
        ("delete", "account", "old-child"),
        ("delete", "account", "old"),
    ]
    reconcile(settings, store)
    assert set(h.accounts(slurmdbd, cluster)) == {"root", "admin", "phys"}
    assert h.associations(slurmdbd, cluster) == {("phys", "kim", "")}
    assert h.defaults(slurmdbd, cluster) == {"kim": "phys"}


def test_mass_removal_stops_unless_forced(
    store: sessionmaker[Session], make_site: Callable[..., Site], slurmdbd: SlurmdbdServer, cluster: str
) -> None:
    site = make_site(reconcile={"max_deletions": 2})
    _one_account(store, site.settings, "kim", "saul", "lalo")
    reconcile(site.settings, store)
    h.set_members(store, site.settings, "physics")
    refused = site.reconcile()
    assert refused.targets[0].state == "refused" and "max_deletions=2" in (refused.targets[0].error or "")
    assert site.last_writes == 0 and len(h.associations(slurmdbd, cluster)) == 3
    forced = site.reconcile(force=True)
    assert forced.targets[0].state == "applied" and h.associations(slurmdbd, cluster) == set()


def test_unregistered_cluster_or_missing_sacctmgr_changes_nothing(
    store: sessionmaker[Session],
    slurm_settings: Callable[..., Settings],
    slurmdbd: SlurmdbdServer,
    cluster: str,
) -> None:
    settings = slurm_settings()
    _one_account(store, settings, "kim")
    reconcile(settings, store)
    h.set_members(store, settings, "physics")  # would remove kim, if anything were decided

    ghost = slurm_settings(clusters=["nowhere"])
    result = run_pass(ghost, store, only=["slurm"], apply=True)
    assert result.targets[0].state == "error" and result.changes == []
    assert "cluster 'nowhere' is not registered" in (result.targets[0].error or "")

    broken = slurm_settings(sacctmgr="/nonexistent/sacctmgr")
    result = run_pass(broken, store, only=["slurm"], apply=True)
    assert result.targets[0].state == "error"
    assert "sacctmgr not found at '/nonexistent/sacctmgr'" in (result.targets[0].error or "")
    assert h.associations(slurmdbd, cluster) == {("phys", "kim", "")}
