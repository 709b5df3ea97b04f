"""SUP as one system, on the real servers: `sup serve` with its reconciler against slapd (read by a
real sssd), slurmdbd (read by sacctmgr) and kube-apiserver."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx

from tests.e2e.stack import Stack, statuses, wait_until
from tests.support import keys

API = "/api/v1"


def _onboard(url: str, headers: dict[str, str], *users: str) -> None:
    httpx.post(f"{url}{API}/groups", json={"name": "physics"}, headers=headers, timeout=30).raise_for_status()
    account = {"name": "phys", "group": "physics", "fairshare": 10}
    httpx.post(f"{url}{API}/slurm/accounts", json=account, headers=headers, timeout=30).raise_for_status()
    for user in users:
        body = {
            "username": user,
            "groups": ["physics"],
            "ssh_public_keys": [keys.ed25519_key(f"{user}@laptop")],
        }
        httpx.post(f"{url}{API}/users", json=body, headers=headers, timeout=30).raise_for_status()


def _converged(stack: Stack, users: list[str]) -> Callable[[], bool]:
    def check() -> bool:
        return (
            all(stack.getent(u) is not None for u in users)
            and {("phys", u) for u in users} <= stack.associations()
            and all(stack.in_kube(u) for u in users)
        )

    return check


def _plan(stack: Stack) -> list[dict[str, object]]:
    result: list[dict[str, object]] = json.loads(stack.sup("plan", "--json"))
    return result


def test_a_user_created_through_the_api_reaches_every_target(stack: Stack) -> None:
    stack.start_sssd()
    server = stack.serve()
    admin = stack.token()
    started = time.monotonic()
    _onboard(server.url, admin, "kim")
    seconds = wait_until(_converged(stack, ["kim"]), timeout=30, what="kim in LDAP, Slurm and Kubernetes")
    assert stack.getent("kim") is not None and ":10000:10000:" in (stack.getent("kim") or "")
    assert stack.sssd is not None and stack.sssd.authorized_keys("kim")[0].endswith("kim@laptop")
    wait_until(lambda: statuses(server, admin, "kim") == dict.fromkeys(("ldap", "slurm", "kube"), "in_sync"))
    assert _plan(stack) == []  # converged: the next pass has nothing to do
    print(f"API write to sssd + sacctmgr + kube: {time.monotonic() - started:.2f} s (poll {seconds:.2f} s)")


def test_drift_in_every_target_is_repaired_by_the_scheduled_pass(make_stack: Callable[..., Stack]) -> None:
    # Long enough that the drift is still there when `sup plan` looks (a loaded machine takes seconds).
    stack = make_stack(interval_seconds=15)
    stack.start_sssd()
    server = stack.serve()
    admin = stack.token()
    _onboard(server.url, admin, "kim", "saul")
    wait_until(_converged(stack, ["kim", "saul"]), timeout=30, what="first convergence")

    # Hand-made drift nobody reports to SUP: an attribute edited in LDAP, an association deleted in
    # Slurm, an object deleted in Kubernetes.
    user_dn = f"uid=kim,ou=people,{stack.config['ldap']['base_dn']}"
    with stack.slapd.admin() as ldap:
        ldap.modify(user_dn, {"loginShell": [("MODIFY_REPLACE", ["/bin/sh"])]})
    stack.slurmdbd.sacctmgr(
        "-i", "delete", "user", "where", "name=saul", "account=phys", f"cluster={stack.cluster}"
    )
    with stack.kubeapi.admin() as api:
        api.delete(f"/api/v1/namespaces/{stack.namespace}/services/{stack.kube_names('kim')['services']}")
    assert not _converged(stack, ["kim", "saul"])()
    assert {(c["target"], c["action"]) for c in _plan(stack)} >= {
        ("ldap", "update"),
        ("slurm", "create"),
        ("kube", "create"),
    }

    def repaired() -> bool:
        if stack.sssd is not None:
            stack.sssd.run("sss_cache", "-E")
        return _converged(stack, ["kim", "saul"])() and ":/bin/bash" in (stack.getent("kim") or "")

    wait_until(repaired, timeout=60, what="drift repaired by the scheduled pass")
    assert _plan(stack) == []


def test_ldap_outage_leaves_the_others_converged_and_heals(stack: Stack) -> None:
    stack.start_sssd()
    server = stack.serve()
    admin = stack.token()
    _onboard(server.url, admin, "kim")
    wait_until(_converged(stack, ["kim"]), timeout=30, what="first convergence")

    stack.slapd.pause()
    try:
        body = {"username": "saul", "groups": ["physics"]}
        httpx.post(f"{server.url}{API}/users", json=body, headers=admin, timeout=30).raise_for_status()
        wait_until(
            lambda: ("phys", "saul") in stack.associations() and stack.in_kube("saul"),
            timeout=30,
            what="saul in Slurm and Kubernetes while LDAP is down",
        )
        wait_until(lambda: statuses(server, admin, "saul")["ldap"] == "error", timeout=30, what="LDAP error")
        assert statuses(server, admin, "saul")["slurm"] == "in_sync"
        ready = httpx.get(f"{server.url}/readyz", timeout=10).json()
        assert ready["status"] == "ready" and ready["reconciler"]["targets"]["ldap"]["state"] == "error"
    finally:
        stack.slapd.resume()
    wait_until(lambda: stack.getent("saul") is not None, timeout=60, what="saul in LDAP after the outage")
    wait_until(lambda: statuses(server, admin, "saul")["ldap"] == "in_sync", timeout=30, what="LDAP in sync")


def test_killed_mid_pass_and_restarted_converges_with_nothing_lost_or_doubled(stack: Stack) -> None:
    stack.start_sssd()
    first = stack.serve("first")
    admin = stack.token()
    users = [f"user{i}" for i in range(20)]
    _onboard(first.url, admin, *users[:1])
    for user in users[1:]:
        body = {"username": user, "groups": ["physics"]}
        httpx.post(f"{first.url}{API}/users", json=body, headers=admin, timeout=30).raise_for_status()
    time.sleep(0.5)  # the reconciler is in the middle of applying the burst
    first.process.kill()
    first.process.wait()

    second = stack.serve("second")
    wait_until(_converged(stack, users), timeout=60, what="convergence after the restart")
    assert stack.associations() == {("phys", u) for u in users}
    objects = stack.kube_objects()
    assert all(len(names) == len(users) for names in objects.values())
    wait_until(
        lambda: all(set(statuses(second, admin, u).values()) == {"in_sync"} for u in users), timeout=30
    )
    assert _plan(stack) == []
