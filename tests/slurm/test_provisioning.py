"""The Slurm target against a real slurmdbd: what `sacctmgr show` reports after each pass."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.reconcile.planner import Pass, run_pass
from sup.store.models import TargetStatus
from tests.slurm import helpers as h
from tests.slurm.site import Site
from tests.support.slurmdbd import SlurmdbdServer


def reconcile(settings: Settings, store: sessionmaker[Session], **kw: Any) -> Pass:
    result = run_pass(settings, store, only=["slurm"], apply=True, **kw)
    target = result.targets[0]
    assert target.state in ("applied", "planned"), (target.state, target.error, target.failed)
    return result


def plan(settings: Settings, store: sessionmaker[Session]) -> list[tuple[str, str, str]]:
    result = run_pass(settings, store, only=["slurm"])
    assert result.targets[0].state == "planned", result.targets[0].error
    return [(c.action, c.kind, c.name) for c in result.changes]


@pytest.fixture
def science(store: sessionmaker[Session], site: Site) -> Settings:
    """science (root) > phys, chem; kim and saul in physics, saul and lalo in chemistry (in the store
    of the test's site, whose settings it returns)."""
    settings = site.settings
    for group in ("physics", "chemistry"):
        h.add_group(store, settings, group)
    h.add_user(store, settings, "kim", "physics")
    h.add_user(store, settings, "saul", "physics", "chemistry")
    h.add_user(store, settings, "lalo", "chemistry")
    h.add_user(store, settings, "nacho")  # in no account: no association
    h.add_account(store, "science", description="Science faculty", organization="uni", fairshare=50)
    h.add_account(
        store,
        "phys",
        parent="science",
        group="physics",
        description="Physics: odd = text, with commas & (brackets)",
        fairshare=100,
        limits={
            "grp_tres": {"cpu": "64", "mem": "20G", "gres/gpu": "8"},  # GPU limits, as on a GPU cluster
            "grp_jobs": 100,
            "max_jobs": 10,
            "max_wall": "2-00:00:00",
        },
    )
    h.add_account(store, "chem", parent="science", group="chemistry", fairshare=30)
    return settings


def test_first_pass_provisions_and_second_pass_writes_nothing(
    science: Settings, site: Site, store: sessionmaker[Session], slurmdbd: SlurmdbdServer, cluster: str
) -> None:
    first = site.reconcile()
    assert first.targets[0].state == "applied" and first.targets[0].failed == []

    assert h.associations(slurmdbd, cluster) == {
        ("phys", "kim", ""),
        ("phys", "saul", ""),
        ("chem", "saul", ""),
        ("chem", "lalo", ""),
    }
    rows = h.accounts(slurmdbd, cluster)
    assert rows["science"]["ParentName"] == "root" and rows["science"]["Fairshare"] == "50"
    assert rows["phys"]["ParentName"] == "science" and rows["chem"]["ParentName"] == "science"
    assert (rows["phys"]["Fairshare"], rows["phys"]["GrpTRES"], rows["phys"]["GrpJobs"]) == (
        "100",
        "cpu=64,gres/gpu=8,mem=20G",
        "100",
    )
    assert (rows["phys"]["MaxJobs"], rows["phys"]["MaxWall"]) == ("10", "2-00:00:00")
    # Users inherit the account's per-user limits; SUP sets nothing of its own on them.
    kim = h.user_row(slurmdbd, cluster, "phys", "kim")
    assert (kim["MaxJobs"], kim["MaxWall"], kim["GrpTRES"]) == ("10", "2-00:00:00", "")
    # Default account: the first of their accounts by name.
    assert h.defaults(slurmdbd, cluster) == {"kim": "phys", "saul": "chem", "lalo": "chem"}
    assert set(h.users(slurmdbd)) == {"kim", "saul", "lalo"}  # nacho has no account, no Slurm user
    descriptions = {row[0]: row[1] for row in slurmdbd.show("account", "format=Account,Description")}
    assert descriptions["phys"].casefold() == "physics: odd = text, with commas & (brackets)"

    with store() as session:
        statuses = {r.username: r.state for r in session.scalars(select(TargetStatus))}
    assert statuses == {"kim": "in_sync", "saul": "in_sync", "lalo": "in_sync", "nacho": "in_sync"}

    second = site.reconcile()
    assert second.targets[0].state == "planned"
    assert second.changes == [] and site.last_writes == 0


def test_user_moves_between_accounts(
    science: Settings, store: sessionmaker[Session], slurmdbd: SlurmdbdServer, cluster: str
) -> None:
    reconcile(science, store)
    assert h.defaults(slurmdbd, cluster)["kim"] == "phys"
    h.set_members(store, science, "physics", "saul")
    h.set_members(store, science, "chemistry", "saul", "lalo", "kim")
    assert plan(science, store) == [
        ("create", "association", "chem/kim"),
        ("update", "user", "kim"),
        ("delete", "association", "phys/kim"),
    ]
    reconcile(science, store)
    assert ("phys", "kim", "") not in h.associations(slurmdbd, cluster)
    assert ("chem", "kim", "") in h.associations(slurmdbd, cluster)
    assert h.defaults(slurmdbd, cluster)["kim"] == "chem"

    # An explicit default account wins while the user is a member of it.
    h.change_user(store, science, "saul", slurm_default_account="phys")
    assert plan(science, store) == [("update", "user", "saul")]
    reconcile(science, store)
    assert h.defaults(slurmdbd, cluster)["saul"] == "phys"
    assert plan(science, store) == []


def test_a_default_account_changed_by_hand_is_put_back(
    science: Settings, store: sessionmaker[Session], slurmdbd: SlurmdbdServer, cluster: str
) -> None:
    """A full pass reads each user's default account from their default associations (OnlyDefaults),
    not from `show user`: a default someone moved is seen, and only that user is written."""
    h.change_user(store, science, "saul", slurm_default_account="phys")
    reconcile(science, store)
    assert h.defaults(slurmdbd, cluster)["saul"] == "phys"
    slurmdbd.sacctmgr(
        "modify", "user", "where", "name=saul", f"cluster={cluster}", "set", "DefaultAccount=chem"
    )
    assert h.defaults(slurmdbd, cluster)["saul"] == "chem"

    assert plan(science, store) == [("update", "user", "saul")]
    reconcile(science, store)
    assert h.defaults(slurmdbd, cluster) == {"kim": "phys", "saul": "phys", "lalo": "chem"}
    assert plan(science, store) == []


def test_account_parent_fairshare_qos_and_limit_changes(
    science: Settings, store: sessionmaker[Session], slurmdbd: SlurmdbdServer, cluster: str
) -> None:
    slurmdbd.sacctmgr("add", "qos", "high")
    reconcile(science, store)
    h.change_account(store, "chem", parent="root")
    h.change_account(
        store,
        "phys",
        fairshare=200,
        qos=["normal", "high"],
        default_qos="high",
        limits={"grp_tres": {"cpu": "128"}, "max_jobs": 20},  # mem, gres/gpu, grp_jobs and max_wall go away
    )
    result = run_pass(science, store, only=["slurm"])
    updates = {c.name: c.details_json() for c in result.changes}
    assert set(updates) == {"chem", "phys"}
    assert updates["chem"]["parent"] == {"old": "science", "new": "root"}
    assert updates["phys"]["fairshare"] == {"old": "100", "new": "200"}
    assert updates["phys"]["grp_tres"] == {"old": "cpu=64,gres/gpu=8,mem=20G", "new": "cpu=128"}
    assert updates["phys"]["max_wall"] == {"old": "2-00:00:00", "new": None}

    reconcile(science, store)
    rows = h.accounts(slurmdbd, cluster)
    assert rows["chem"]["ParentName"] == "root"
    phys = rows["phys"]
    assert (phys["Fairshare"], phys["QOS"], phys["DefaultQOS"]) == ("200", "high,normal", "high")
    assert (phys["GrpTRES"], phys["GrpJobs"], phys["MaxJobs"], phys["MaxWall"]) == ("cpu=128", "", "20", "")
    kim = h.user_row(slurmdbd, cluster, "phys", "kim")
    assert (kim["QOS"], kim["MaxJobs"], kim["MaxWall"]) == ("high,normal", "20", "")
    assert plan(science, store) == []


def test_deactivated_user_loses_every_association(
    science: Settings, store: sessionmaker[Session], slurmdbd: SlurmdbdServer, cluster: str
) -> None:
    reconcile(science, store)
    h.change_user(store, science, "saul", active=False)
    assert plan(science, store) == [
        # blocked first (MaxSubmitJobs=0): a removal slurmdbd refuses must not leave them open
        ("update", "association", "chem/saul"),
        ("update", "association", "phys/saul"),
        ("delete", "association", "chem/saul"),
        ("delete", "association", "phys/saul"),
    ]
    reconcile(science, store)
    assert {u for _, u, _ in h.associations(slurmdbd, cluster)} == {"kim", "lalo"}
    assert "saul" not in h.users(slurmdbd)  # slurmdbd drops a user without associations


def test_partitions_and_several_clusters(
    store: sessionmaker[Session],
    slurm_settings: Callable[..., Settings],
    slurmdbd: SlurmdbdServer,
    cluster: str,
) -> None:
    other = f"{cluster}b"
    slurmdbd.sacctmgr("add", "cluster", other)
    settings = slurm_settings(clusters=[other])
    h.add_group(store, settings, "gpu-users")
    h.add_user(store, settings, "kim", "gpu-users")
    h.add_account(store, "gpu", group="gpu-users", partitions=["a100", "h100"])
    reconcile(settings, store)
    expected = {("gpu", "kim", "a100"), ("gpu", "kim", "h100")}
    assert h.associations(slurmdbd, cluster) == expected and h.associations(slurmdbd, other) == expected
    assert h.defaults(slurmdbd, cluster) == {"kim": "gpu"} == h.defaults(slurmdbd, other)

    h.change_account(store, "gpu", partitions=["h100"])
    assert plan(settings, store) == [
        *[("update", "user", "kim")] * 2,  # on each cluster the default is set again on the rows that stay
        *[("delete", "association", "gpu/kim/a100")] * 2,
    ]
    reconcile(settings, store)
    assert h.associations(slurmdbd, cluster) == {("gpu", "kim", "h100")} == h.associations(slurmdbd, other)
    h.change_account(store, "gpu", partitions=[])
    reconcile(settings, store)
    assert h.associations(slurmdbd, cluster) == {("gpu", "kim", "")}
    assert plan(settings, store) == []


def _statuses(store: sessionmaker[Session]) -> dict[str, tuple[str, str | None]]:
    with store() as session:
        rows = session.scalars(select(TargetStatus).where(TargetStatus.target == "slurm"))
        return {r.username: (r.state, r.last_error) for r in rows}


def test_running_jobs_block_one_user_not_the_batch(
    science: Settings, store: sessionmaker[Session], slurmdbd: SlurmdbdServer, cluster: str
) -> None:
    reconcile(science, store)
    h.change_user(store, science, "kim", active=False)
    h.change_user(store, science, "lalo", active=False)
    slurmdbd.fake_running_job(cluster, "phys", "kim", job_id=4242)

    result = run_pass(science, store, only=["slurm"], apply=True)
    target = result.targets[0]
    assert target.state == "partial"
    assert [(f.change.name, f.change.subject) for f in target.failed] == [("phys/kim", "kim")]
    assert "Job(s) active" in target.failed[0].error
    assert {u for _, u, _ in h.associations(slurmdbd, cluster)} == {"kim", "saul"}  # lalo is gone
    statuses = _statuses(store)
    assert statuses["kim"][0] == "error" and "Job(s) active" in (statuses["kim"][1] or "")
    assert statuses["lalo"] == ("in_sync", None)

    slurmdbd.finish_job(cluster, 4242)
    reconcile(science, store)  # retried on the next pass
    assert {u for _, u, _ in h.associations(slurmdbd, cluster)} == {"saul"}
    assert _statuses(store)["kim"] == ("in_sync", None)


def test_user_fairshare_setting(
    store: sessionmaker[Session],
    slurm_settings: Callable[..., Settings],
    slurmdbd: SlurmdbdServer,
    cluster: str,
) -> None:
    settings = slurm_settings(user_fairshare="parent")
    h.add_group(store, settings, "physics")
    h.add_user(store, settings, "kim", "physics")
    h.add_account(store, "phys", group="physics", fairshare=40)
    reconcile(settings, store)
    assert h.user_row(slurmdbd, cluster, "phys", "kim")["Fairshare"] == "parent"
    slurmdbd.sacctmgr("modify", "user", "where", "name=kim", f"cluster={cluster}", "set", "fairshare=9")
    result = run_pass(settings, store, only=["slurm"])
    assert [(c.name, c.details_json().get("fairshare")) for c in result.changes] == [
        ("phys/kim", {"old": "9", "new": "parent"})
    ]
    reconcile(settings, store)
    assert h.user_row(slurmdbd, cluster, "phys", "kim")["Fairshare"] == "parent"
    without = slurm_settings()  # not managed: left as it is
    slurmdbd.sacctmgr("modify", "user", "where", "name=kim", f"cluster={cluster}", "set", "fairshare=9")
    assert plan(without, store) == []
