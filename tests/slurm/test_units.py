"""The Slurm target's pure parts: outcome classification, parsing, comparison, planning, batching.
No slurmdbd needed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sup.config import Settings
from sup.domain.desired import DesiredAccount, DesiredGroup, DesiredState, DesiredUser
from sup.targets.base import DELETE, Change, ObserveError, TargetError
from sup.targets.slurm import SlurmSettings, parse
from sup.targets.slurm.apply import Applier, chunks, create_options, operations, set_options, text_options
from sup.targets.slurm.desired import build
from sup.targets.slurm.diff import plan
from sup.targets.slurm.lock import slurmdbd_address
from sup.targets.slurm.model import (
    ATTRIBUTES,
    AccountCreate,
    AccountDelete,
    Association,
    ClusterState,
    Limits,
    Observed,
    OldNew,
    normalize,
    same,
)
from sup.targets.slurm.sacctmgr import Outcome, Result, Sacctmgr, SlurmUnreachable, classify

# --- sacctmgr outcomes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "outcome"),
    [
        (0, " Adding User(s)\n  kim\n", "", Outcome.OK),
        (1, " Nothing new added.\n", "", Outcome.NOOP),  # 22.05 / 23.02 add
        (1, " Request didn't affect anything\n", "", Outcome.NOOP),  # 23.11+
        (1, " Nothing added.\n", "", Outcome.NOOP),  # 23.11+ add
        (1, " Nothing deleted\n", "", Outcome.NOOP),
        (1, " Nothing modified\n", "", Outcome.NOOP),
        (1, " Removing Coordinators ...\n Nothing removed\n", "", Outcome.NOOP),
        (1, "", " This account 'x' doesn't exist.\n", Outcome.ERROR),
        (1, " Nothing new added.\n", " Parent account 'x' doesn't exist\n", Outcome.ERROR),
        (1, " Error with request: Job(s) active, cancel job(s) before remove\n", "", Outcome.ERROR),
    ],
)
def test_outcome_classification(returncode: int, stdout: str, stderr: str, outcome: Outcome) -> None:
    assert classify(returncode, stdout, stderr) is outcome


# --- parsing -------------------------------------------------------------------------------------------


def test_account_descriptions_with_bars_and_line_breaks() -> None:
    text = (
        "phys|kim,saul|sci|physics | optics\n"
        "ops||it|first line\nsecond | line\n"
        "root||root|default root account\n"
    )
    accounts = parse.accounts(text)
    assert accounts["phys"].description == "physics | optics"
    assert accounts["phys"].coordinators == {"kim", "saul"}
    assert accounts["ops"].description == "first line\nsecond | line"
    assert accounts["root"].coordinators == frozenset()


def test_unexpected_output_is_an_observe_error() -> None:
    good = "c1|phys|kim||" + "|" * len(ATTRIBUTES) + "\n"
    assert parse.associations(good, "c1")[0].user == "kim"
    with pytest.raises(ObserveError, match="fields"):
        parse.associations("c1|phys|kim\n", "c1")
    with pytest.raises(ObserveError, match="cluster 'c1'"):
        parse.associations(good.replace("c1", "c2"), "c1")
    with pytest.raises(ObserveError):
        parse.users("kim\n")
    with pytest.raises(ObserveError):
        parse.default_accounts("kim|phys|extra\n")


def test_a_full_reads_defaults_and_levels_come_from_their_own_reads() -> None:
    # One default association per partition: all of the one default account.
    assert parse.default_accounts("Kim|Phys\nkim|phys\nsaul|chem\n") == {"kim": "phys", "saul": "chem"}
    assert parse.admin_levels("root|Administrator\nkim|\n") == {"root": "Administrator", "kim": "None"}


def test_values_compare_as_slurm_means_them() -> None:
    assert same("tres", "cpu=10,mem=20G", "mem=20480,cpu=10")
    assert same("tres", "mem=1T", "mem=1024G") and not same("tres", "cpu=1", "cpu=2")
    assert same("time", "2-00:00:00", "2880") and same("time", "02:00:00", "120")
    assert same("qos", "normal,high", "high,normal") and same("int", "", None)
    assert same("share", "parent", "Parent") and normalize("time", "1-12") == 2160


# --- planning ------------------------------------------------------------------------------------------


def _user(name: str, *, active: bool = True, default: str | None = None) -> DesiredUser:
    return DesiredUser(
        name, 10000, 10000, None, None, None, None, f"/home/{name}", "/bin/bash", (), active, default
    )


def _account(name: str, parent: str, members: set[str], **kw: object) -> DesiredAccount:
    values: dict[str, object] = {
        "description": None, "organization": None, "fairshare": None, "qos": (), "default_qos": None,
        "partitions": (), "limits": {},
    }  # fmt: skip
    values.update(kw)
    return DesiredAccount(name=name, parent=parent, members=frozenset(members), **values)  # type: ignore[arg-type]


def _row(account: str, user: str = "", parent: str = "", **values: str) -> Association:
    full = {a.key: "" for a in ATTRIBUTES} | {"fairshare": "1"} | values
    return Association("c1", account, user, "", parent, full)


def test_plan_orders_parents_defaults_and_removals() -> None:
    desired = DesiredState(
        users={"kim": _user("kim", default="chem"), "saul": _user("saul")},
        groups={"ops": DesiredGroup("ops", 50000, None, frozenset({"saul"}), False)},
        accounts={
            "chem": _account("chem", "science", {"kim"}),
            "science": _account("science", "root", set(), fairshare=50),
            "phys": _account("phys", "science", {"kim", "saul"}, limits={"max_jobs": 5}),
        },
    )
    state = ClusterState("c1")
    state.accounts = {
        "root": _row("root"),
        "science": _row("science", parent="root", fairshare="50"),
        "phys": _row("phys", parent="science", max_jobs="5"),
    }
    state.users = {
        ("phys", "kim", ""): _row("phys", "kim", max_jobs="5"),
        ("phys", "stranger", ""): _row("phys", "stranger", max_jobs="5"),
        ("root", "root", ""): _row("root", "root"),
    }
    state.defaults = {"kim": "phys", "stranger": "phys", "root": "root"}
    observed = Observed({"c1": state}, {}, {"kim": "None", "stranger": "None", "root": "Administrator"})
    settings = SlurmSettings(cluster="c1", admin_groups={"ops": "Operator"})
    changes = plan(build(desired, settings), observed)
    assert [(c.action, c.kind, c.name) for c in changes] == [
        ("create", "account", "chem"),
        ("create", "association", "phys/saul"),  # a new user, created with their default account
        ("create", "association", "chem/kim"),
        ("update", "user", "kim"),  # the explicit default (chem) once kim is a member
        ("update", "user", "saul"),  # Operator, from the ops group
        ("delete", "association", "phys/stranger"),  # the store is authoritative in SUP's accounts
    ]
    assert changes[1].details_json() == {
        "cluster": "c1",
        "account": "phys",
        "user": "saul",
        "default_account": True,
    }
    assert changes[3].details_json() == {"cluster": "c1", "default_account": {"old": "phys", "new": "chem"}}
    assert changes[4].details_json() == {"admin_level": {"old": "None", "new": "Operator"}}
    # The plan is pure: the same inputs give the same plan.
    assert plan(build(desired, settings), observed) == changes


def test_inherited_values_are_reset_not_copied() -> None:
    changes = set_options(
        Limits(
            {
                "max_jobs": OldNew("99", "10"),
                "qos": OldNew("high", "normal"),
                "grp_tres": OldNew("cpu=64,mem=20G", "cpu=128"),
                "max_tres_per_job": OldNew("node=2", "node=4"),
                "fairshare": OldNew("5", "100"),
            },
            inherit=("max_jobs", "qos", "max_tres_per_job"),
        )
    )
    assert changes == ("Fairshare=100", "QOS=", "GrpTRES=cpu=128,mem=-1", "MaxJobs=-1", "MaxTRES=node=-1")
    created = AccountCreate("c1", "root", "Physics dept", None, {"fairshare": "10", "qos": "high,normal"})
    assert create_options(created) == ("Fairshare=10", "QOS=high,normal")
    assert text_options(created) == ("Description=Physics dept",)


def test_operations_batch_by_command_and_chunk() -> None:
    desired = DesiredState(
        users={f"u{i}": _user(f"u{i}") for i in range(7)},
        accounts={"phys": _account("phys", "root", {f"u{i}" for i in range(7)}, partitions=("gpu",))},
    )
    state = ClusterState("c1")
    state.accounts = {"root": _row("root")}
    changes = plan(build(desired, SlurmSettings(cluster="c1")), Observed({"c1": state}, {}, {}))
    phases = operations(changes)
    assert [[op.template.kind for op in phase] for phase in phases] == [
        ["add_account"],
        ["add_user_default"],
        [],
        [],
    ]
    users = phases[1][0]
    argvs = [users.template.argv(",".join(n for n, _ in chunk)) for chunk in chunks(users.items, 3)]
    assert argvs == [
        ["add", "user", "u0,u1,u2", "Account=phys", "Cluster=c1", "Partition=gpu", "DefaultAccount=phys"],
        ["add", "user", "u3,u4,u5", "Account=phys", "Cluster=c1", "Partition=gpu", "DefaultAccount=phys"],
        ["add", "user", "u6", "Account=phys", "Cluster=c1", "Partition=gpu", "DefaultAccount=phys"],
    ]


# --- settings and locks --------------------------------------------------------------------------------


def test_slurm_settings_are_checked() -> None:
    assert SlurmSettings(cluster="gpu", clusters=["cpu"]).all_clusters() == ["gpu", "cpu"]
    for bad in (
        {"cluster": "GPU cluster"},
        {"cluster": "gpu", "clusters": ["gpu"]},
        {"cluster": "gpu", "admin_groups": {"ops": "Root"}},
        {"cluster": "gpu", "chunk_size": 0},
        {"cluster": "gpu", "ignore_users": ["a", "a"]},
    ):
        with pytest.raises(ValidationError):
            Settings(slurm=bad)
    defaults = SlurmSettings(cluster="gpu")
    assert (defaults.prune_accounts, defaults.admin_groups, defaults.user_fairshare) == (False, {}, None)


def test_slurmdbd_address_from_slurm_conf(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=gpu\n# AccountingStorageHost=old\nAccountingStorageHost=dbd.example\n")
    assert slurmdbd_address(None, {"SLURM_CONF": str(conf)}) == "dbd.example:6819"
    conf.write_text("accountingstoragehost = 10.0.0.5\nAccountingStoragePort=7031\n")
    assert slurmdbd_address(None, {"SLURM_CONF": str(conf)}) == "10.0.0.5:7031"
    assert slurmdbd_address("db:1", {"SLURM_CONF": str(conf)}) == "db:1"
    assert slurmdbd_address(None, {"SLURM_CONF": str(tmp_path / "missing")}) == "default"


def test_accounts_are_deleted_children_first() -> None:
    changes = [
        Change("slurm", DELETE, "account", name, AccountDelete("c1", depth))
        for name, depth in (("top", 1), ("leaf", 3), ("middle", 2))
    ]
    (removals,) = [phase for phase in operations(changes) if phase]
    assert [op.template.argv(",".join(n for n, _ in op.items))[3] for op in removals] == [
        "Name=leaf",
        "Name=middle",
        "Name=top",
    ]


def _fake_sacctmgr(tmp_path: Path, body: str) -> str:
    script = tmp_path / "sacctmgr"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_timeouts_and_an_unreachable_slurmdbd(tmp_path: Path) -> None:
    slow = Sacctmgr(_fake_sacctmgr(tmp_path, "sleep 5"), timeout=0.3)
    result = slow.write(["add", "user", "kim", "Account=phys"])
    assert result.outcome is Outcome.ERROR and "timed out" in result.message
    with pytest.raises(ObserveError, match="timed out"):
        slow.show("association", ["User"])

    down = Sacctmgr(
        _fake_sacctmgr(
            tmp_path,
            "echo 'sacctmgr: error: slurm_persist_conn_open_without_init: failed to open persistent "
            "connection to host:127.0.0.1:6819: Connection refused' >&2; exit 1",
        ),
        timeout=5,
    )
    with pytest.raises(SlurmUnreachable, match="Connection refused"):
        down.write(["add", "user", "kim", "Account=phys"])
    with pytest.raises(ObserveError, match="Connection refused"):
        down.show("association", ["User"])
    with pytest.raises(TargetError, match="sacctmgr not found"):
        Sacctmgr(str(tmp_path / "missing"), timeout=5).write(["add", "user", "kim"])


def test_a_first_association_waits_for_the_posix_identity() -> None:
    desired = DesiredState(
        users={"kim": _user("kim"), "saul": _user("saul", default="phys")},
        accounts={
            "phys": _account("phys", "root", {"kim", "saul"}),
            "chem": _account("chem", "root", {"saul"}),
        },
        identity_pending=frozenset({"kim", "saul"}),
    )
    state = ClusterState("c1")
    state.accounts = {
        "root": _row("root"),
        "phys": _row("phys", parent="root"),
        "chem": _row("chem", parent="root"),
    }
    state.users = {("phys", "saul", ""): _row("phys", "saul")}  # saul is known to the scheduler
    state.defaults = {"saul": "phys"}
    changes = plan(build(desired, SlurmSettings(cluster="c1")), Observed({"c1": state}, {}, {}))
    assert [(c.action, c.kind, c.name) for c in changes] == [
        ("create", "association", "chem/saul"),
        ("report", "user", "kim"),
    ]
    assert "POSIX identity" in changes[1].details_json()["reason"]


def test_an_account_naming_an_undefined_qos_is_planned_blocked_and_fails_without_sacctmgr() -> None:
    desired = DesiredState(
        users={"kim": _user("kim"), "saul": _user("saul")},
        accounts={
            "gpu": _account("gpu", "root", {"kim"}, qos=("normal", "GPU-High"), default_qos="GPU-High"),
            "gpu-a100": _account("gpu-a100", "gpu", {"kim"}),  # below it: cannot be created either
            "chem": _account("chem", "root", {"saul"}, qos=("normal",)),
            "phys": _account("phys", "root", set(), qos=("normal", "gone")),  # exists: an update
        },
    )
    state = ClusterState("c1")
    state.accounts = {"root": _row("root"), "phys": _row("phys", parent="root", qos="normal")}
    settings = SlurmSettings(cluster="c1")
    observed = Observed({"c1": state}, {}, {}, qos=frozenset({"normal"}))  # as parse.qos_names reads
    changes: dict[tuple[str, str, str], Change[Any]] = {
        (str(c.action), c.kind, c.name): c for c in plan(build(desired, settings), observed)
    }
    blocked = {key: c.details_json().get("blocked") for key, c in changes.items()}
    assert "QoS 'GPU-High' not defined in slurmdbd" in str(blocked[("create", "account", "gpu")])
    assert "sacctmgr add qos" in str(blocked[("create", "account", "gpu")])
    assert "parent account 'gpu' cannot be created" in str(blocked[("create", "account", "gpu-a100")])
    assert "account 'gpu' cannot be created" in str(blocked[("create", "association", "gpu/kim")])
    assert "QoS 'gone'" in str(blocked[("update", "account", "phys")])
    assert blocked[("create", "account", "chem")] is None  # "normal" is defined (case aside)
    assert blocked[("create", "association", "chem/saul")] is None
    # QoS not read (a scoped pass): nothing is blocked, sacctmgr has the last word as before.
    unread = plan(build(desired, settings), Observed({"c1": state}, {}, {}))
    assert not any(c.details_json().get("blocked") for c in unread)

    calls: list[list[str]] = []

    class Recording(Sacctmgr):
        def write(self, argv: Sequence[str]) -> Result:
            calls.append(list(argv))
            return Result(tuple(argv), 0, "", "", Outcome.OK, 0.0)

    report = Applier(Recording("sacctmgr", 10), 100, lambda: observed).run(list(changes.values()))
    failed = {(f.change.kind, f.change.name): f.error for f in report.failed}
    blocked_ones = {
        ("account", "gpu"),
        ("account", "gpu-a100"),
        ("association", "gpu/kim"),
        ("association", "gpu-a100/kim"),
        ("account", "phys"),
    }
    assert set(failed) == blocked_ones
    assert failed[("account", "gpu")] == blocked[("create", "account", "gpu")]
    ran = " ".join(" ".join(argv) for argv in calls)
    assert "chem" in ran and "gpu" not in ran and "phys" not in ran  # the blocked ones ran nothing
