"""Against a real kube-apiserver (no controllers, no kubelet: the test writes the statuses they would):
a login pod stuck in CrashLoopBackOff on an outdated template is deleted by SUP's pass; a healthy pod
and a pod SUP does not control are left alone, and no claim goes."""

from __future__ import annotations

from sup.reconcile.planner import run_pass
from tests.kube.site import Site
from tests.kube.stuck import login_pod, stuck_rollout


def test_a_crash_looping_pod_on_an_old_template_is_replaced_and_nothing_else_is(site: Site) -> None:
    for name in ("kim", "saul", "lalo"):
        site.add_user(name)
    site.converge()
    with site.admin() as admin:
        for workload in ("login-kim", "login-saul", "login-lalo"):
            stuck_rollout(admin, site, workload)
        stuck = login_pod(admin, site, "login-kim", "crashloop")
        healthy = login_pod(admin, site, "login-saul", "running")
        theirs = login_pod(admin, site, "login-lalo", "crashloop", controlled=False)
    claims = site.names("pvc")

    plan = site.plan()
    (change,) = plan.changes
    assert (change.action, change.kind, change.name, change.subject) == (
        "update",
        "pod",
        "login-kim-0",
        "kim",
    )
    assert change.details_json()["waiting"] == "CrashLoopBackOff"

    result = site.converge()  # the replacement, then a pass with nothing to do
    (kube,) = result.targets
    assert [(c.kind, c.name) for c in kube.applied] == [("pod", "login-kim-0")]
    pods = {p: site.get("pods", p) for p in ("login-kim-0", "login-saul-0", "login-lalo-0")}
    assert pods["login-kim-0"] is None  # the StatefulSet controller recreates it from the fixed template
    assert (
        pods["login-saul-0"] is not None
        and pods["login-saul-0"]["metadata"]["uid"] == healthy["metadata"]["uid"]
    )
    assert (
        pods["login-lalo-0"] is not None
        and pods["login-lalo-0"]["metadata"]["uid"] == theirs["metadata"]["uid"]
    )
    assert stuck["metadata"]["uid"] != ""
    assert site.names("pvc") == claims and "login-kim" in site.names("workload")
    assert site.statuses()["kim"] == ("in_sync", None)


def test_no_pod_is_read_while_every_rollout_is_done(site: Site) -> None:
    site.add_user("kim")
    site.converge()
    with site.admin() as admin:
        login_pod(admin, site, "login-kim", "crashloop")  # crash-looping, but on the StatefulSet's template
    site.reconcile()
    (target,) = site.targets[-1:]
    assert ("list", "pods") not in target.client.requests
    assert site.get("pods", "login-kim-0") is not None


def test_a_pass_after_a_write_replaces_the_named_users_stuck_pod(site: Site) -> None:
    site.add_user("kim")
    site.converge()
    assert run_pass(site.settings, site.sessions, apply=True, opener=site._open).ok  # clears the outbox
    with site.admin() as admin:
        stuck_rollout(admin, site, "login-kim")
        login_pod(admin, site, "login-kim", "imagepullbackoff")
    site.update_user("kim", display_name="Kim Wexler")

    result = run_pass(site.settings, site.sessions, apply=True, scoped=True, opener=site._open)
    (kube,) = [t for t in result.targets if t.target == "kube"]
    assert kube.scoped
    assert {(c.action, c.kind, c.name) for c in kube.applied} == {
        ("update", "login_config", "login-kim"),  # the new gecos
        ("update", "pod", "login-kim-0"),
    }
    assert site.get("pods", "login-kim-0") is None
