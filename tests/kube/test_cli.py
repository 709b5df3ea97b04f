"""`sup plan --target kube` and `sup reconcile --target kube` as an operator runs them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.kube.site import Site
from tests.support.cli import run_sup


def test_plan_shows_the_objects_and_reconcile_makes_them(site: Site) -> None:
    site.add_user("kim")
    env = site.env(COLUMNS="400")
    plan = run_sup("plan", "--target", "kube", env=env)
    assert plan.returncode == 0, plan.stderr
    assert "kube: planned, 5 change(s)" in plan.stdout
    assert "ldap: disabled" not in plan.stdout  # only the target asked for
    assert site.home("kim") in plan.stdout and "size: - -> 10Gi" not in plan.stdout
    assert "size: 10Gi" in plan.stdout and "image: localhost/sup-login:0.1.0" in plan.stdout

    as_json = json.loads(run_sup("plan", "--json", "--target", "kube", env=env).stdout)
    assert sorted((c["action"], c["kind"], c["name"], c["subject"]) for c in as_json) == [
        ("create", "login_config", "login-kim", "kim"),
        ("create", "network_policy", "login-kim", "kim"),
        ("create", "pvc", site.home("kim"), "kim"),
        ("create", "service", "login-kim", "kim"),
        ("create", "workload", "login-kim", "kim"),
    ]
    assert all(c["details"]["manifest"]["metadata"]["namespace"] == site.namespace for c in as_json)
    assert site.names("pvc") == set()  # a plan changes nothing

    done = run_sup("reconcile", "--target", "kube", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 applied, 0 failed" in done.stdout
    assert "No changes." in run_sup("plan", "--target", "kube", env=env).stdout

    site.update_user("kim", active=False)
    plan = run_sup("plan", "--target", "kube", env=env)
    assert "orphaned_since: - -> 20" in plan.stdout and "delete" in plan.stdout


def test_an_unreachable_api_server_is_a_target_error(site: Site, tmp_path: Path) -> None:
    config = site.server.write_kubeconfig(tmp_path / "dead.kubeconfig", token="not-a-real-token")
    text = config.read_text().replace(site.server.url, "https://127.0.0.1:9")
    config.write_text(text)
    site.with_kube(kubeconfig=str(config), timeout_seconds=2)
    site.add_user("kim")
    result = run_sup("plan", "--target", "kube", env=site.env())
    assert result.returncode == 8
    assert "kube: error" in result.stdout and "cannot reach the API server" in result.stdout
    assert "not-a-real-token" not in result.stdout + result.stderr


def test_a_bad_token_is_refused_and_not_shown(site: Site, tmp_path: Path) -> None:
    config = site.server.write_kubeconfig(tmp_path / "bad.kubeconfig", token="s3cret-token-value")
    site.with_kube(kubeconfig=str(config))
    result = run_sup("plan", "--target", "kube", env=site.env())
    assert result.returncode == 8 and "401" in result.stdout
    assert "s3cret-token-value" not in result.stdout + result.stderr
