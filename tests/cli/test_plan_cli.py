"""`sup plan` / `sup reconcile` and their API twins, with no target servers configured."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import yaml
from fastapi.testclient import TestClient

from tests.support.cli import run_sup, sup_env


def test_plan_with_every_target_disabled(tmp_path: Path) -> None:
    env = sup_env(SUP_DATABASE_URL=f"sqlite:///{tmp_path / 'sup.db'}")
    assert run_sup("db", "upgrade", env=env).returncode == 0
    text = run_sup("plan", env=env)
    assert text.returncode == 0, text.stderr
    assert (
        "ldap: disabled" in text.stdout and "kube: disabled" in text.stdout and "No changes." in text.stdout
    )
    as_json = run_sup("plan", "--json", env=env)
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == []
    reconciled = run_sup("reconcile", "--json", env=env)
    assert reconciled.returncode == 0
    assert [t["state"] for t in json.loads(reconciled.stdout)["targets"]] == ["disabled"] * 3
    # -o json is --json; -o yaml the same object: each target's state and counts, and the changes
    as_json = run_sup("reconcile", "-o", "json", env=env)
    as_yaml = run_sup("reconcile", "-o", "yaml", env=env)
    assert as_json.returncode == 0 and as_yaml.returncode == 0
    assert json.loads(as_json.stdout) == json.loads(reconciled.stdout) == yaml.safe_load(as_yaml.stdout)
    assert set(json.loads(as_json.stdout)) == {"targets", "changes"}
    assert set(json.loads(as_json.stdout)["targets"][0]) >= {"target", "state", "error", "applied", "failed"}
    assert run_sup("plan", "--target", "nfs", env=env).returncode == 2


def test_configured_but_unavailable_target_is_reported_not_fatal(tmp_path: Path) -> None:
    env = sup_env(SUP_DATABASE_URL=f"sqlite:///{tmp_path / 'sup.db'}", SUP_KUBE__NAMESPACE="research")
    run_sup("db", "upgrade", env=env)
    result = run_sup("plan", env=env)
    assert result.returncode == 8
    assert "kube: error" in result.stdout and "ldap: disabled" in result.stdout


def test_plan_and_reconcile_endpoints(
    client: TestClient, viewer: dict[str, str], operator: dict[str, str]
) -> None:
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    plan = client.get("/api/v1/plan", headers=viewer)
    assert plan.status_code == 200
    body = plan.json()
    started = datetime.datetime.fromisoformat(body.pop("started_at"))  # when the plan was made
    assert before <= started <= datetime.datetime.now(datetime.UTC)
    assert body == {
        "targets": [
            {
                "target": t,
                "state": "disabled",
                "scoped": False,
                "error": None,
                "changes": 0,
                "applied": 0,
                "failed": [],
            }
            for t in ("ldap", "slurm", "kube")
        ],
        "changes": [],
    }
    assert client.post("/api/v1/reconcile", headers=viewer).status_code == 403
    done = client.post("/api/v1/reconcile", json={"targets": ["ldap"]}, headers=operator)
    assert done.status_code == 200 and [t["target"] for t in done.json()["targets"]] == ["ldap"]
    assert "started_at" in done.json()
    bad = client.get("/api/v1/plan", params={"target": "nfs"}, headers=viewer)
    assert bad.status_code == 422
