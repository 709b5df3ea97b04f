"""Hand-made drift in slurmdbd, shown by `sup plan` and repaired by `sup reconcile`, as an operator
runs them (real processes, real sacctmgr)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import yaml
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from tests.slurm import helpers as h
from tests.support.cli import run_sup, sup_env
from tests.support.slurmdbd import SlurmdbdServer


def test_drift_is_planned_then_repaired(
    store: sessionmaker[Session],
    slurm_settings: Callable[..., Settings],
    slurmdbd: SlurmdbdServer,
    cluster: str,
    store_url: str,
    tmp_path: Path,
) -> None:
    settings = slurm_settings()
    for group in ("physics", "chemistry"):
        h.add_group(store, settings, group)
    h.add_user(store, settings, "kim", "physics")
    h.add_user(store, settings, "lalo", "chemistry")
    h.add_account(store, "phys", group="physics", fairshare=100, limits={"max_jobs": 10})
    h.add_account(store, "chem", group="chemistry")
    env = sup_env(
        SUP_DATABASE_URL=store_url,
        SUP_SLURM__CLUSTER=cluster,
        SUP_SLURM__SACCTMGR=slurmdbd.bin["sacctmgr"],
        SUP_SLURM__LOCK_DIR=str(tmp_path / "locks"),
        COLUMNS="250",
    )
    first = run_sup("reconcile", env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "slurm: applied, 4 change(s), 4 applied, 0 failed" in first.stdout

    # Drift, by hand: an association deleted, a fairshare edited, a per-user limit set, a stranger
    # added to a managed account, and an account SUP does not know (with a '|' in its description).
    slurmdbd.sacctmgr("delete", "user", "where", "name=lalo", "account=chem", f"cluster={cluster}")
    slurmdbd.sacctmgr("modify", "account", "where", "name=phys", f"cluster={cluster}", "set", "fairshare=5")
    slurmdbd.sacctmgr(
        "modify", "user", "where", "name=kim", "account=phys", f"cluster={cluster}", "set", "maxjobs=99"
    )
    slurmdbd.sacctmgr("add", "account", "ops", f"cluster={cluster}", "description=ops | on call")
    slurmdbd.sacctmgr("add", "user", "stranger", "account=phys", f"cluster={cluster}")
    slurmdbd.sacctmgr("add", "user", "stranger", "account=ops", f"cluster={cluster}")

    planned = run_sup("plan", "--json", env=env)
    assert planned.returncode == 0, planned.stderr
    changes = {(c["action"], c["kind"], c["name"]): c for c in json.loads(planned.stdout)}
    assert set(changes) == {
        ("create", "association", "chem/lalo"),
        ("update", "account", "phys"),
        ("update", "association", "phys/kim"),
        ("update", "user", "stranger"),  # their default moves off phys before phys/stranger goes
        ("delete", "association", "phys/stranger"),
        ("report", "account", "ops"),
    }
    assert changes[("update", "user", "stranger")]["details"]["default_account"] == {
        "old": "phys",
        "new": "ops",
    }
    assert changes[("update", "account", "phys")]["details"] == {
        "cluster": cluster,
        "fairshare": {"old": "5", "new": "100"},
    }
    assert changes[("update", "association", "phys/kim")]["details"]["max_jobs"] == {"old": "99", "new": "10"}
    assert changes[("delete", "association", "phys/stranger")]["subject"] == "stranger"

    as_yaml = run_sup("plan", "-o", "yaml", env=env)  # the same list, for scripts that read YAML
    assert as_yaml.returncode == 0 and yaml.safe_load(as_yaml.stdout) == json.loads(planned.stdout)
    table = run_sup("plan", env=env)
    assert table.returncode == 0
    for text in ("slurm: planned, 6 change(s)", "phys/stranger", "fairshare: 5 -> 100", "not in SUP's store"):
        assert text in table.stdout, table.stdout

    repaired = run_sup("reconcile", env=env)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert h.associations(slurmdbd, cluster) == {
        ("phys", "kim", ""),
        ("chem", "lalo", ""),
        ("ops", "stranger", ""),  # not SUP's account: left alone
    }
    assert h.accounts(slurmdbd, cluster)["phys"]["Fairshare"] == "100"
    assert h.user_row(slurmdbd, cluster, "phys", "kim")["MaxJobs"] == "10"
    assert h.defaults(slurmdbd, cluster)["stranger"] == "ops"

    after = run_sup("plan", "--json", env=env)
    assert [(c["action"], c["name"]) for c in json.loads(after.stdout)] == [("report", "ops")]
