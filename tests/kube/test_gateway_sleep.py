"""Login pods that sleep, against a real kube-apiserver (docs/ssh-gateway.md, "Scale to zero"): the
scheduled pass puts an idle owner's StatefulSet to replicas 0, a wake brings it to 1 at once, the
pass after that writes nothing, and the home claim is never touched."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import select

from sup.config import GatewaySettings
from sup.domain.login_pods import Route
from sup.logins import service
from sup.logins import wake_state as state
from sup.store.audit import Actor
from sup.store.models import AuditEntry, LoginWake, utcnow
from tests.kube.site import Site

GATEWAY = Actor(name="gateway-token", role="gateway")


def _replicas(site: Site, name: str) -> Any:
    sts = site.get("workload", name)
    assert sts is not None, f"StatefulSet {name} is missing"
    return sts["spec"]["replicas"]


def _idle_since(site: Site, kind: str, name: str, hours: float) -> None:
    with site.sessions.begin() as session:
        row = session.get(LoginWake, (kind, name))
        assert row is not None, f"no wake state for {kind} {name}"
        row.last_activity = utcnow() - timedelta(hours=hours)


def _gateway_reports(site: Site, ago: float = 0) -> None:
    """A gateway replica's heartbeat, `ago` seconds old: nobody connected, no reporter answers. SUP
    puts pods to sleep only while some replica reports (docs/ssh-gateway.md, "Scale to zero")."""
    with site.sessions.begin() as session:
        state.record_heartbeat(session, "gw-test", [], [], utcnow() - timedelta(seconds=ago), 15)


def _wake(site: Site, kind: str, name: str) -> bool:
    with site.sessions.begin() as session:
        return service.wake(session, site.settings, Route(kind, name), utcnow(), GATEWAY)  # type: ignore[arg-type]


def test_an_idle_pod_sleeps_a_wake_brings_it_back_at_once_and_the_home_stays(site: Site) -> None:
    site.settings = site.settings.model_copy(update={"gateway": GatewaySettings(idle_seconds=3600)})
    site.add_user("kim")
    site.add_user("saul")
    site.converge()
    # first sight: both awake, for idle_seconds from now
    assert _replicas(site, "login-kim") == 1 and _replicas(site, "login-saul") == 1
    home = site.get("pvc", site.home("kim"))
    assert home is not None

    _idle_since(site, "user", "kim", hours=2)
    _gateway_reports(site)
    result = site.converge()  # and the pass after it writes nothing
    assert [(c.action, c.kind, c.name) for c in result.changes] == [("update", "workload", "login-kim")]
    assert _replicas(site, "login-kim") == 0 and _replicas(site, "login-saul") == 1

    assert _wake(site, "user", "kim") is True
    assert _replicas(site, "login-kim") == 1  # at once, not at the next pass
    before = site.versions()
    assert _wake(site, "user", "kim") is False  # idempotent: no second write
    assert site.versions() == before

    again = site.reconcile()
    assert again.changes == [] and site.last_writes == 0

    # asleep again, and woken again: the field goes back and forth between the pass and the wake
    _idle_since(site, "user", "kim", hours=2)
    _gateway_reports(site)
    site.converge()
    assert _replicas(site, "login-kim") == 0
    assert _wake(site, "user", "kim") is True and _replicas(site, "login-kim") == 1
    again = site.reconcile()
    assert again.changes == [] and site.last_writes == 0

    after = site.get("pvc", site.home("kim"))
    assert after is not None
    assert after["metadata"]["uid"] == home["metadata"]["uid"]
    assert after["metadata"]["resourceVersion"] == home["metadata"]["resourceVersion"]


def test_no_pod_sleeps_while_no_gateway_reports_and_idle_ones_sleep_once_one_does(site: Site) -> None:
    """Without a live heartbeat SUP cannot see sessions or tmux: a pass puts nothing to sleep (no
    gateway running, or its last report older than three heartbeats), and counts the awake pods
    as in use; once a replica reports, a pod idle for idle_seconds sleeps again."""
    site.settings = site.settings.model_copy(update={"gateway": GatewaySettings(idle_seconds=3600)})
    site.add_user("kim")
    site.converge()
    for stale in (None, 46.0):  # no gateway ever reported; then its report is 46 s old (3 x 15 s)
        _idle_since(site, "user", "kim", hours=2)
        if stale is not None:
            _gateway_reports(site, ago=stale)
        assert site.reconcile().changes == []
        assert _replicas(site, "login-kim") == 1
        with site.sessions() as session:
            row = session.get(LoginWake, ("user", "kim"))
            assert row is not None and row.awake
            assert row.last_activity is not None and utcnow() - row.last_activity < timedelta(minutes=5)
    with site.sessions() as session:
        assert session.scalars(select(AuditEntry).where(AuditEntry.action == "sleep")).all() == []

    _idle_since(site, "user", "kim", hours=2)
    _gateway_reports(site)
    result = site.converge()
    assert [(c.action, c.kind, c.name) for c in result.changes] == [("update", "workload", "login-kim")]
    assert _replicas(site, "login-kim") == 0


def test_without_idle_seconds_pods_never_sleep(site: Site) -> None:
    site.settings = site.settings.model_copy(update={"gateway": GatewaySettings()})
    site.add_user("kim")
    site.converge()
    with site.sessions.begin() as session:
        session.add(
            LoginWake(kind="user", name="kim", awake=False, last_activity=utcnow() - timedelta(days=9))
        )
    assert site.reconcile().changes == []
    assert _replicas(site, "login-kim") == 1


def test_idle_sleep_on_adds_the_idle_reporter_to_login_pods_and_off_takes_it_away(
    make_site: Callable[..., Site],
) -> None:
    site = make_site(pod_security="baseline", group_pods=["physics"], ssh_sources=["203.0.113.0/24"])
    site.add_user("kim")
    site.add_group("physics", members=["kim"])
    site.converge()
    policies = {name: site.get("network_policy", name) for name in ("login-kim", "group-physics")}
    assert _idle_env(site, "login-kim") == _idle_env(site, "group-physics") == []
    assert _service_ports(site, "login-kim") == [("ssh", 22, 2222)]

    site.settings = site.settings.model_copy(
        update={"gateway": GatewaySettings(idle_seconds=3600, idle_port=9111)}
    )
    result = site.converge()
    changed = sorted((c.action, c.kind, c.name) for c in result.changes)
    assert changed == [
        ("update", "service", "group-physics"), ("update", "service", "login-kim"),
        ("update", "workload", "group-physics"), ("update", "workload", "login-kim"),
    ]  # fmt: skip
    for name in ("login-kim", "group-physics"):
        assert _idle_env(site, name) == [{"name": "SUP_IDLE_PORT", "value": "9111"}]
        assert _service_ports(site, name) == [("ssh", 22, 2222), ("idle", 9111, 9111)]
        # SUP's own policy still admits ssh_sources to sshd only (the chart's admits the gateway)
        policy, before = site.get("network_policy", name), policies[name]
        assert policy is not None and before is not None
        assert policy["spec"] == before["spec"]
        assert policy["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    again = site.reconcile()
    assert again.changes == [] and site.last_writes == 0

    site.settings = site.settings.model_copy(update={"gateway": None})
    site.converge()
    assert _idle_env(site, "login-kim") == [] and _service_ports(site, "login-kim") == [("ssh", 22, 2222)]


def _idle_env(site: Site, name: str) -> list[dict[str, Any]]:
    sts = site.get("workload", name)
    assert sts is not None
    container = sts["spec"]["template"]["spec"]["containers"][0]
    return [e for e in container["env"] if e["name"] == "SUP_IDLE_PORT"]


def _service_ports(site: Site, name: str) -> list[tuple[str, int, int]]:
    service = site.get("service", name)
    assert service is not None
    return [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]]
