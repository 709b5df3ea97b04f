"""`sup plan` and `sup reconcile`, run as an operator runs them, go through the registered steps
(sup/reconcile/steps.py) as the reconciler's passes do: `sup reconcile` puts an idle login pod to
sleep, `sup plan` plans from the wake state and puts nothing to sleep (docs/ssh-gateway.md, "Scale
to zero"). Against a real kube-apiserver."""

from __future__ import annotations

from pathlib import Path

import yaml
from sqlalchemy import select

from sup.config import GatewaySettings
from sup.store.models import AuditEntry, LoginWake
from tests.kube.site import Site
from tests.kube.test_gateway_sleep import _gateway_reports, _idle_since, _replicas
from tests.support.cli import run_sup, sup_env


def _awake(site: Site, name: str) -> bool:
    with site.sessions() as session:
        row = session.get(LoginWake, ("user", name))
        assert row is not None, f"no wake state for {name}"
        return row.awake


def test_sup_reconcile_puts_an_idle_pod_to_sleep_and_sup_plan_only_reads_the_wake_state(
    site: Site, tmp_path: Path
) -> None:
    site.settings = site.settings.model_copy(update={"gateway": GatewaySettings(idle_seconds=3600)})
    site.add_user("kim")
    site.converge()
    assert _replicas(site, "login-kim") == 1
    config = tmp_path / "sup.yaml"
    settings = {
        "database_url": site.settings.database_url,
        "kube": {"namespace": site.namespace, "kubeconfig": str(site.kubeconfig)},
        "gateway": {"idle_seconds": 3600},
    }
    config.write_text(yaml.safe_dump(settings))
    env = sup_env(SUP_CONFIG=str(config))

    _idle_since(site, "user", "kim", hours=2)
    _gateway_reports(site)
    planned = run_sup("plan", "--json", env=env)
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.strip() == "[]"  # a plan puts nothing to sleep
    assert _awake(site, "kim")

    applied = run_sup("reconcile", "--json", env=env)
    assert applied.returncode == 0, applied.stderr
    assert not _awake(site, "kim")
    assert _replicas(site, "login-kim") == 0
    with site.sessions() as session:
        audit = session.scalars(select(AuditEntry).where(AuditEntry.action == "sleep")).all()
    assert [(a.resource_type, a.resource_name) for a in audit] == [("gateway", "user/kim")]

    # woken in the store only: `sup plan` reads the wake state and plans the pod back up
    with site.sessions.begin() as session:
        row = session.get(LoginWake, ("user", "kim"))
        assert row is not None
        row.awake = True
    planned = run_sup("plan", "--json", env=env)
    assert planned.returncode == 0, planned.stderr
    assert '"login-kim"' in planned.stdout and '"update"' in planned.stdout
