"""A login pod's files (passwd, group, keys) and how the diff plans their ConfigMap (pure)."""

from __future__ import annotations

from dataclasses import replace

from sup.domain.desired import DesiredGroup
from sup.targets.base import Scope
from sup.targets.kube.login_files import MAX_BYTES, Directory
from sup.targets.kube.model import Observed
from sup.targets.kube.spec import can_scope
from tests.kube.plans import applied, brief, diff, group, settings, state, user

KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA kim@laptop"
KEY_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB kim@desktop"


def _private(name: str, gid: int) -> DesiredGroup:
    return DesiredGroup(name=name, gid_number=gid, description=None, members=frozenset(), private=True)


def test_a_users_files_are_their_passwd_line_their_groups_and_their_keys() -> None:
    kim = replace(
        user("kim", 10000), display_name="Kim: Wexler-Müller", ssh_public_keys=(KEY_B, KEY_A, KEY_B)
    )
    saul = user("saul", 10001)
    desired = state(
        kim,
        saul,
        groups=(
            _private("kim", 10000),
            _private("saul", 10001),
            group("physics", 50000, "kim", "saul"),
            group("zoo", 50002, "kim"),
            group("chemistry", 50001, "saul"),
        ),
    )
    files = Directory(desired).files([kim])
    assert files.refused == {}
    assert files.data == {
        # gecos: ASCII, no ':' (the domain's rule), so the line keeps its seven fields
        "passwd": "kim:x:10000:10000:Kim Wexler-Muller:/home/kim:/bin/bash\n",
        # her private group and her groups, by name; a member list names only people in passwd
        "group": "kim:x:10000:\nphysics:x:50000:kim\nzoo:x:50002:kim\n",
        "kim.keys": f"{KEY_B}\n{KEY_A}\n" if KEY_B < KEY_A else f"{KEY_A}\n{KEY_B}\n",
    }
    assert all(len(line.split(":")) == 7 for line in files.data["passwd"].splitlines())
    assert Directory(desired).files([kim]) == files  # deterministic


def test_a_group_pods_files_list_every_member_and_only_them() -> None:
    kim, saul, zed = user("kim", 10000), user("saul", 10001), user("zed", 10002)
    desired = state(
        kim,
        saul,
        zed,
        groups=(
            _private("saul", 10001),
            group("physics", 50000, "kim", "saul"),
            group("x", 50001, "zed", "kim"),
        ),
    )
    files = Directory(desired).files([saul, kim])
    assert [line.split(":")[0] for line in files.data["passwd"].splitlines()] == ["kim", "saul"]
    assert files.data["group"] == "physics:x:50000:kim,saul\nsaul:x:10001:\nx:x:50001:kim\n"
    assert set(files.data) == {"passwd", "group", "kim.keys", "saul.keys"}
    assert files.data["kim.keys"] == ""  # no key: nobody logs in as kim


def test_a_key_with_a_line_break_never_adds_a_line() -> None:
    kim = replace(user("kim"), ssh_public_keys=(KEY_A, f"{KEY_B}\nssh-ed25519 AAAA evil"))
    assert Directory(state(kim)).files([kim]).data["kim.keys"] == f"{KEY_A}\n"


def test_a_person_whose_passwd_line_would_break_is_left_out_and_reported() -> None:
    bad = replace(user("kim"), home_directory="/home/kim:/bin/sh")
    files = Directory(state(bad)).files([bad])
    assert "kim" in files.refused and files.data["passwd"] == ""
    changes = diff(state(bad), Observed())
    reports = {(c.kind, c.name): c for c in changes if c.action == "report"}
    assert "':'" in reports["login_config", "login-kim"].details_json()["error"]
    assert "cannot be written" in reports["workload", "login-kim"].details_json()["error"]  # the pod waits
    assert ("create", "workload", "login-kim") not in brief(changes)


def test_files_too_big_for_a_configmap_are_not_written_and_the_pod_waits() -> None:
    many = tuple(f"ssh-ed25519 {'A' * 1000}{i:06d} kim" for i in range(MAX_BYTES // 1000 + 1))
    kim = replace(user("kim"), ssh_public_keys=many)
    changes = diff(state(kim), Observed())
    reports = {(c.kind, c.name): c for c in changes if c.action == "report"}
    assert "more than a ConfigMap holds" in reports["login_config", "login-kim"].details_json()["error"]
    assert ("workload", "login-kim") in reports


def test_a_key_change_updates_the_configmap_and_nothing_else() -> None:
    kim = user("kim")
    observed = applied(diff(state(kim), Observed()))
    changes = diff(state(replace(kim, ssh_public_keys=(KEY_A,))), observed)
    assert brief(changes) == [("update", "login_config", "login-kim")]
    assert changes[0].details_json()["data.kim.keys"] == {
        "old": "",
        "new": f"{KEY_A}\n",
    }


def test_the_workload_mounts_the_configmap_read_only_and_needs_it() -> None:
    (workload,) = [c for c in diff(state(user("kim")), Observed()) if c.kind == "workload"]
    pod = workload.details_json()["manifest"]["spec"]["template"]["spec"]
    assert {"name": "login", "configMap": {"name": "login-kim"}} in pod["volumes"]
    assert {"name": "login", "mountPath": "/etc/sup/login", "readOnly": True} in pod["containers"][0][
        "volumeMounts"
    ]


def test_a_shared_groups_change_needs_a_full_read() -> None:
    desired = state(user("kim"), groups=(_private("kim", 10000), group("physics", 50000, "kim")))
    kube = settings()
    assert can_scope(kube, Scope(frozenset({"kim"}), frozenset({"kim"})), desired)  # her private group
    assert not can_scope(kube, Scope(frozenset(), frozenset({"physics"})), desired)
    assert can_scope(kube, Scope(frozenset({"kim"}), frozenset({"gone"})), desired)  # deleted: members named
