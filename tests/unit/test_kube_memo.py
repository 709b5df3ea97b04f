"""The Kubernetes target's memo (sup/targets/kube/memo.py): bounded by the namespace, not by a number a
large site passes."""

from __future__ import annotations

from sup.targets.kube.memo import VerifiedObjects


def test_a_50000_user_namespace_stays_remembered() -> None:
    """Five objects a user: 250,000 at 50,000 users. A memo that starts over below that makes every
    pass render and compare everything (it did: 58 s no-change passes at 50,000 users)."""
    memo = VerifiedObjects()
    for i in range(250_000):
        memo.remember(("ns", "workload", f"login-u{i}"), i, "1", ())
    assert len(memo) == 250_000
    assert memo.verified(("ns", "workload", "login-u0"), 0, "1") == ()
    assert memo.verified(("ns", "workload", "login-u249999"), 249_999, "1") == ()


def test_a_full_pass_forgets_what_is_gone_in_its_namespace_only() -> None:
    memo = VerifiedObjects()
    for namespace in ("a", "b"):
        for name in ("login-kim", "login-saul"):
            memo.remember((namespace, "workload", name), name, "7", (("network_policy", name),))
    memo.retain("a", [("workload", "login-kim")])
    kept = memo.verified(("a", "workload", "login-kim"), "login-kim", "7")
    assert kept == (("network_policy", "login-kim"),)
    assert memo.verified(("a", "workload", "login-saul"), "login-saul", "7") is None
    assert memo.verified(("b", "workload", "login-saul"), "login-saul", "7") is not None
    assert len(memo) == 3
