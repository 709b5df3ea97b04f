"""A group pod's ConfigMap and people's keys on a real kube-apiserver (issue 24): one member whose keys
would take it over what a ConfigMap holds is left out of it, and everyone else's changes still land."""

from __future__ import annotations

from collections.abc import Callable

from sup.config.accounts import AccountPolicy
from sup.targets.kube.login_files import MAX_BYTES
from tests.kube.site import Site
from tests.support.keys import ed25519_key


def _wide_keys(who: str, count: int) -> list[str]:
    """`count` keys of about 1.1 KB each (a comment of 1000 characters)."""
    return [ed25519_key(f"{who}{i:04d}" + "c" * (996 - len(who))) for i in range(count)]


def test_a_member_whose_keys_overfill_a_group_pod_is_left_out_and_the_rest_is_written(
    make_site: Callable[..., Site],
) -> None:
    site = make_site(pod_security="baseline", group_pods=["physics"], home_access_mode="ReadWriteMany")
    # Caps raised to their ceiling (a quarter of a ConfigMap each): five such people fill one.
    site.settings = site.settings.model_copy(
        update={"accounts": AccountPolicy(max_ssh_keys=300, max_ssh_key_bytes=262144)}
    )
    members = ["amy", "bob", "kim", "lee", "saul", "zed"]
    first = {name: ed25519_key(f"{name}@laptop") for name in members}
    for name in members:
        site.add_user(name, ssh_public_keys=[first[name]])
    site.add_group("physics", members=members)
    site.converge()

    # Four members with about 200 KB of keys each and zed with about 250 KB: 1.05 MB together.
    for name in ("amy", "bob", "lee", "saul"):
        site.update_user(name, ssh_public_keys=_wide_keys(name, 180))
    site.update_user("zed", ssh_public_keys=_wide_keys("zed", 230))
    new_key = ed25519_key("kim@desktop")
    site.update_user("kim", ssh_public_keys=[new_key])  # must reach the pod all the same

    result = site.reconcile()
    files = site.get("login_config", "group-physics")
    assert files is not None
    data = files["data"]
    assert data["kim.keys"] == f"{new_key}\n"  # before: the ConfigMap was refused, then deleted
    assert "zed.keys" not in data
    assert all(len(data[f"{name}.keys"].splitlines()) == 180 for name in ("amy", "bob", "lee", "saul"))
    assert [line.split(":")[0] for line in data["passwd"].splitlines()] == members  # zed is still known
    assert sum(len(k.encode()) + len(v.encode()) for k, v in data.items()) <= MAX_BYTES

    (report,) = [c for c in result.changes if c.action == "report"]
    assert (report.kind, report.name, report.subject) == ("login_config", "group-physics", "zed")
    assert "more than a ConfigMap holds" in report.details_json()["error"]
    statuses = site.statuses()
    assert statuses["zed"][0] == "error" and "SSH keys of zed" in (statuses["zed"][1] or "")
    assert statuses["kim"] == ("in_sync", None) and statuses["amy"][0] == "in_sync"

    again = site.reconcile()  # the same report, nothing written again
    assert [(c.action, c.subject) for c in again.changes] == [("report", "zed")]
    assert site.last_writes == 0

    site.update_user("zed", ssh_public_keys=[first["zed"]])  # zed trims their keys: back in
    site.reconcile()
    files = site.get("login_config", "group-physics")
    assert files is not None and files["data"]["zed.keys"] == f"{first['zed']}\n"
