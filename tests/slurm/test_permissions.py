"""Permissions by group: Slurm AdminLevel for admin groups, coordinators for an account's group."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from tests.slurm import helpers as h
from tests.slurm.test_provisioning import plan, reconcile
from tests.support.slurmdbd import SlurmdbdServer


def test_admin_levels_follow_the_admin_groups(
    store: sessionmaker[Session],
    slurm_settings: Callable[..., Settings],
    slurmdbd: SlurmdbdServer,
    cluster: str,
) -> None:
    settings = slurm_settings(admin_groups={"hpc-ops": "Operator", "hpc-admins": "Administrator"})
    for group in ("hpc-users", "hpc-ops", "hpc-admins"):
        h.add_group(store, settings, group)
    h.add_user(store, settings, "kim", "hpc-users", "hpc-ops")
    h.add_user(store, settings, "saul", "hpc-users", "hpc-ops", "hpc-admins")
    h.add_user(store, settings, "lalo", "hpc-users")
    h.add_user(store, settings, "nacho", "hpc-admins")  # no account: no Slurm user to promote
    h.add_account(store, "general", group="hpc-users")
    result = reconcile(settings, store)
    assert [(c.action, c.name) for c in result.changes if c.kind == "user"] == [
        ("update", "kim"),
        ("update", "saul"),
        ("report", "nacho"),
    ]
    assert h.users(slurmdbd) == {"kim": "Operator", "saul": "Administrator", "lalo": "None"}

    slurmdbd.sacctmgr("modify", "user", "where", "name=lalo", "set", "adminlevel=Administrator")  # by hand
    h.set_members(store, settings, "hpc-admins", "nacho")  # saul loses Administrator, keeps Operator
    h.change_user(store, settings, "kim", active=False)  # a locked user has no privileges
    reconcile(settings, store)
    assert h.users(slurmdbd) == {"saul": "Operator", "lalo": "None"}


def test_admin_levels_are_left_alone_without_admin_groups(
    store: sessionmaker[Session],
    slurm_settings: Callable[..., Settings],
    slurmdbd: SlurmdbdServer,
    cluster: str,
) -> None:
    settings = slurm_settings()
    h.add_group(store, settings, "hpc-users")
    h.add_user(store, settings, "kim", "hpc-users")
    h.add_account(store, "general", group="hpc-users")
    reconcile(settings, store)
    slurmdbd.sacctmgr("modify", "user", "where", "name=kim", "set", "adminlevel=Operator")
    assert plan(settings, store) == []
    assert h.users(slurmdbd) == {"kim": "Operator"}


def test_coordinators_group(
    store: sessionmaker[Session],
    slurm_settings: Callable[..., Settings],
    slurmdbd: SlurmdbdServer,
    cluster: str,
) -> None:
    settings = slurm_settings()
    for group in ("physics", "physics-leads"):
        h.add_group(store, settings, group)
    h.add_user(store, settings, "kim", "physics", "physics-leads")
    h.add_user(store, settings, "saul", "physics")
    h.add_user(store, settings, "howard", "physics-leads")  # coordinates, but has no association
    h.add_account(store, "phys", group="physics", coordinators="physics-leads")
    h.add_account(store, "optics", parent="phys", group="physics")
    result = reconcile(settings, store)
    reports = [(c.kind, c.name) for c in result.changes if c.action == "report"]
    assert reports == [("coordinator", "phys/howard")]
    # A coordinator of phys coordinates its sub-account optics too (Slurm shows both).
    assert h.coordinators(slurmdbd) == {"phys": {"kim"}, "optics": {"kim"}}

    slurmdbd.sacctmgr("add", "coordinator", "account=optics", "names=saul")  # by hand
    assert plan(settings, store) == [
        ("remove_members", "coordinator", "optics/saul"),
        ("report", "coordinator", "phys/howard"),
    ]
    h.set_members(store, settings, "physics-leads", "saul")
    reconcile(settings, store)
    assert h.coordinators(slurmdbd) == {"phys": {"saul"}, "optics": {"saul"}}
    assert plan(settings, store) == []
    h.change_account(store, "phys", coordinators=None)
    reconcile(settings, store)
    assert h.coordinators(slurmdbd) == {"phys": set(), "optics": set()}
