"""Ambiguous outcomes against the real sacctmgr: no-ops re-read and accepted, errors isolated."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.config.targets import target_context
from sup.reconcile.planner import desired_state, run_pass
from sup.reconcile.targets import store_lock
from sup.targets.slurm import SPEC, SlurmTarget
from tests.slurm import helpers as h
from tests.support.slurmdbd import SlurmdbdServer


def test_applying_a_stale_plan_again_is_harmless(
    store: sessionmaker[Session],
    slurm_settings: Callable[..., Settings],
    slurmdbd: SlurmdbdServer,
    cluster: str,
) -> None:
    settings = slurm_settings()
    h.add_group(store, settings, "physics")
    for name in ("kim", "saul", "lalo", "nacho"):
        h.add_user(store, settings, name, "physics")
    h.add_account(store, "phys", group="physics", fairshare=10)
    planner = SlurmTarget(target_context(SPEC, settings, store_lock(store.kw["bind"])))
    changes = planner.diff(desired_state(store, settings), planner.observe())  # what `sup plan` shows
    first = SlurmTarget(target_context(SPEC, settings, store_lock(store.kw["bind"])))
    report = first.apply(changes)
    assert (len(report.applied), report.failed) == (len(changes), [])
    assert first.sacctmgr.reads == 0  # every call exited 0: nothing to verify

    # The same plan again: every sacctmgr call answers "Nothing new added." (exit 1); the state is
    # read again, shows it all done, and nothing is reported as failed.
    again = SlurmTarget(target_context(SPEC, settings, store_lock(store.kw["bind"])))
    report = again.apply(changes)
    assert (len(report.applied), report.failed) == (len(changes), [])
    assert again.sacctmgr.reads > 0
    assert len(h.associations(slurmdbd, cluster)) == 4


def test_a_refused_account_fails_alone_and_names_its_error(
    store: sessionmaker[Session],
    slurm_settings: Callable[..., Settings],
    slurmdbd: SlurmdbdServer,
    cluster: str,
) -> None:
    settings = slurm_settings()
    for group in ("physics", "chemistry"):
        h.add_group(store, settings, group)
    h.add_user(store, settings, "kim", "physics")
    h.add_user(store, settings, "saul", "chemistry")
    qos = f"gpu-{cluster}"  # a QoS slurmdbd does not define (yet): SUP binds QoS, never creates them
    h.add_account(store, "phys", group="physics", qos=["normal", qos])
    h.add_account(store, "chem", group="chemistry")
    result = run_pass(settings, store, only=["slurm"], apply=True)
    target = result.targets[0]
    assert target.state == "partial"
    failed = {(f.change.kind, f.change.name): f.error for f in target.failed}
    assert set(failed) == {("account", "phys"), ("association", "phys/kim")}
    # Found by the plan (the QoS were read), said plainly, with the way out.
    assert f"QoS '{qos}' not defined in slurmdbd" in failed[("account", "phys")]
    assert "sacctmgr add qos NAME" in failed[("account", "phys")]
    assert "account 'phys' cannot be created" in failed[("association", "phys/kim")]
    assert h.associations(slurmdbd, cluster) == {("chem", "saul", "")}
    assert "phys" not in h.accounts(slurmdbd, cluster)

    slurmdbd.sacctmgr("add", "qos", qos)  # the operator defines it: the next pass goes through
    again = run_pass(settings, store, only=["slurm"], apply=True).targets[0]
    assert (again.state, again.failed) == ("applied", [])
    assert h.associations(slurmdbd, cluster) == {("chem", "saul", ""), ("phys", "kim", "")}
