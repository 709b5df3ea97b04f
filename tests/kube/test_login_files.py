"""A login pod's files (passwd, group, keys) and how the diff plans their ConfigMap (pure)."""

from __future__ import annotations

from dataclasses import replace

from sup.domain.desired import DesiredGroup
from sup.targets.base import Scope
from sup.targets.kube.login_files import FEW_USERS_SHARE, MAX_BYTES, Directory
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


def test_a_few_users_get_the_same_files_as_from_the_whole_site() -> None:
    """A pass scoped to a few users indexes only their groups (FEW_USERS_SHARE); what their pods get
    is what a full pass renders for them: the groups they are in, and a group holding their
    primary gid without them as members."""
    people = [user(f"u{i:02}", 10000 + i) for i in range(40)]
    groups = [_private(p.username, p.uid_number) for p in people]
    groups += [group(f"lab{i}", 50000 + i, *(p.username for p in people[i::4])) for i in range(4)]
    groups.append(group("staff", 10003, "u07"))  # u03's primary gid, without u03 as a member
    whole = state(*people, groups=tuple(groups))
    for person in (people[3], people[5]):
        few = replace(whole, users={person.username: person})
        assert len(few.users) < FEW_USERS_SHARE * len(few.groups)  # the scoped way
        expected = Directory(whole).files([person])
        assert Directory(few).files([person]) == expected
        assert Directory(few).supplemental_gids(person) == Directory(whole).supplemental_gids(person)
    assert "staff:x:10003:" in Directory(whole).files([people[3]]).data["group"]


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


def _keys(name: str, count: int, width: int = 1000) -> tuple[str, ...]:
    """`count` distinct key lines of about `width` bytes each (the files never parse them)."""
    return tuple(f"ssh-ed25519 {name}{i:06d}{'A' * width} {name}" for i in range(count))


def test_a_group_pod_over_the_limit_leaves_out_the_largest_key_sets_and_writes_the_rest() -> None:
    # Two members whose keys alone would fill the ConfigMap, and two with a key each. Before, the
    # whole ConfigMap was refused: nobody's key change reached the pod.
    zed = replace(user("zed", 10003), ssh_public_keys=_keys("zed", MAX_BYTES // 2000 + 120))
    bob = replace(user("bob", 10002), ssh_public_keys=_keys("bob", MAX_BYTES // 2000 + 100))
    kim = replace(user("kim", 10000), ssh_public_keys=(KEY_A,))
    saul = replace(user("saul", 10001), ssh_public_keys=(KEY_B,))
    desired = state(zed, bob, kim, saul, groups=(group("physics", 50000, "zed", "bob", "kim", "saul"),))
    files = Directory(desired).files([zed, bob, kim, saul])
    assert files.size > MAX_BYTES
    fitted = files.within(MAX_BYTES)
    assert fitted.size <= MAX_BYTES
    # zed's set is the larger: only zed is left out (bob's then fits), and the same every pass
    assert set(fitted.keys_left_out) == {"zed"} and fitted == files.within(MAX_BYTES)
    assert set(fitted.data) == {"passwd", "group", "bob.keys", "kim.keys", "saul.keys"}
    assert "zed:x:10003" in fitted.data["passwd"]  # still known to the pod (files, processes)

    changes = diff(desired, Observed(), settings(group_pods=["physics"]))
    (configmap,) = [c for c in changes if c.action == "create" and c.name == "group-physics"
                    and c.kind == "login_config"]  # fmt: skip
    written = configmap.details_json()["manifest"]["data"]
    assert written["kim.keys"] == f"{KEY_A}\n" and written["saul.keys"] == f"{KEY_B}\n"
    assert "zed.keys" not in written
    (report,) = [c for c in changes if c.action == "report" and c.name == "group-physics"]
    assert report.subject == "zed" and report.kind == "login_config"
    error = report.details_json()["error"]
    assert "SSH keys of zed" in error and "more than a ConfigMap holds" in error
    assert ("create", "workload", "group-physics") in brief(changes)  # the pod is not held back


def test_equal_key_sets_over_the_limit_are_left_out_by_name() -> None:
    amy = replace(user("amy", 10000), ssh_public_keys=_keys("xx", 600))
    ben = replace(user("ben", 10001), ssh_public_keys=_keys("yy", 600))
    files = Directory(state(amy, ben)).files([ben, amy])
    assert files.data["amy.keys"] != files.data["ben.keys"]
    assert len(files.data["amy.keys"]) == len(files.data["ben.keys"])
    assert set(files.within(MAX_BYTES).keys_left_out) == {"amy"}


def test_files_that_do_not_fit_even_without_keys_come_back_whole() -> None:
    kim = replace(user("kim"), ssh_public_keys=(KEY_A,))
    files = Directory(state(kim)).files([kim])
    assert files.within(10) is files


def test_a_stored_key_with_a_bidi_character_is_left_out_and_reported() -> None:
    # The API refuses such a key now (sup/domain/sshkeys.py); one stored before is still not
    # written to the pod (a bidi override shows a comment as another), and the pod's people hear why.
    hidden = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIC kim@\u202elaptop"
    kim = replace(user("kim"), ssh_public_keys=(KEY_A, hidden))
    files = Directory(state(kim)).files([kim])
    assert files.data["kim.keys"] == f"{KEY_A}\n"
    assert "1 SSH key(s) of kim" in files.keys_left_out["kim"]
    reports = [c for c in diff(state(kim), Observed()) if c.action == "report"]
    assert [(c.kind, c.name, c.subject) for c in reports] == [("login_config", "login-kim", "kim")]
    assert "bidi" in reports[0].details_json()["error"]


def test_a_configmap_sup_refuses_to_write_is_kept_not_deleted() -> None:
    # A user's files that no longer fit (or whose passwd line would break): the pod keeps the
    # ConfigMap it has. Before, the refused ConfigMap counted as "not wanted" and was deleted,
    # taking every key of the pod with it.
    kim = replace(user("kim"), ssh_public_keys=(KEY_A,))
    observed = applied(diff(state(kim), Observed()))
    many = tuple(f"ssh-ed25519 {'A' * 1000}{i:06d} kim" for i in range(MAX_BYTES // 1000 + 1))
    changes = diff(state(replace(kim, ssh_public_keys=many)), observed)
    assert ("delete", "login_config", "login-kim") not in brief(changes)
    assert [c.action for c in changes if c.kind == "login_config"] == ["report"]


def test_a_key_change_updates_the_configmap_and_nothing_else() -> None:
    kim = user("kim")
    observed = applied(diff(state(kim), Observed()))
    changes = diff(state(replace(kim, ssh_public_keys=(KEY_A,))), observed)
    assert brief(changes) == [("update", "login_config", "login-kim")]
    assert changes[0].details_json()["data.kim.keys"] == {
        "old": "",
        "new": f"{KEY_A}\n",
    }


CA = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIC sup-ssh-ca"
OLD_CA = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAID the-previous-ca"


def test_the_ssh_cas_reach_every_login_pods_configmap_and_a_rotation_updates_only_them() -> None:
    """With ssh_ca on, each login pod's ConfigMap carries the CA keys sshd trusts (sup-ssh-ca.pub;
    the login image's sup-login hands it to sshd); without, no such file."""
    kim, saul = user("kim", 10000), user("saul", 10001)
    plain = state(kim, saul, groups=(group("physics", 50000, "kim", "saul"),))
    assert "sup-ssh-ca.pub" not in Directory(plain).files([kim]).data
    trusting = replace(plain, ssh_user_ca_keys=(CA,))
    for people in ([kim], [kim, saul]):  # a user's pod, a group's pod
        assert Directory(trusting).files(people).data["sup-ssh-ca.pub"] == f"{CA}\n"
    observed = applied(diff(trusting, Observed()))
    assert diff(trusting, observed) == []  # a second pass writes nothing
    rotated = replace(trusting, ssh_user_ca_keys=(CA, OLD_CA))
    changes = diff(rotated, observed)
    assert brief(changes) == [
        ("update", "login_config", "login-kim"),
        ("update", "login_config", "login-saul"),
    ]
    assert changes[0].details_json()["data.sup-ssh-ca.pub"] == {"old": f"{CA}\n", "new": f"{CA}\n{OLD_CA}\n"}


def test_certificates_only_leaves_every_keys_file_out_of_user_and_group_pods() -> None:
    """With plain_keys_in_login_pods false (ssh_ca.plain_keys: false) no login pod gets a keys file,
    a user's or a group's; passwd, group and the CA keys stay, so certificates still work. Switching
    to it updates the ConfigMaps alone (no restart), and a pass after it writes nothing."""
    kim = replace(user("kim", 10000), ssh_public_keys=(KEY_A,))
    saul = replace(user("saul", 10001), ssh_public_keys=(KEY_B,))
    keys = replace(state(kim, saul, groups=(group("physics", 50000, "kim", "saul"),)), ssh_user_ca_keys=(CA,))
    certificates_only = replace(keys, plain_keys_in_login_pods=False)
    for people in ([kim], [kim, saul]):  # a user's pod, a group's pod
        names = {f"{person.username}.keys" for person in people}
        assert set(Directory(keys).files(people).data) == {"passwd", "group", "sup-ssh-ca.pub", *names}
        files = Directory(certificates_only).files(people)
        assert set(files.data) == {"passwd", "group", "sup-ssh-ca.pub"}
        assert files.data["sup-ssh-ca.pub"] == f"{CA}\n"
        assert files.data["passwd"] == Directory(keys).files(people).data["passwd"]

    kube = settings(group_pods=["physics"])
    observed = applied(diff(keys, Observed(), kube))
    assert diff(keys, observed, kube) == []
    changes = diff(certificates_only, observed, kube)
    assert sorted(brief(changes)) == [
        ("update", "login_config", "group-physics"),
        ("update", "login_config", "login-kim"),
        ("update", "login_config", "login-saul"),
    ]
    for change in changes:  # the keys files are fields SUP no longer sets: the apply removes them
        assert set(change.details_json()["manifest"]["data"]) == {"passwd", "group", "sup-ssh-ca.pub"}
    fresh = applied(diff(certificates_only, Observed(), kube))
    assert diff(certificates_only, fresh, kube) == []


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
    joined = Scope(frozenset({"kim"}), frozenset({"physics"}), members_only=frozenset({"physics"}))
    assert can_scope(kube, joined, desired)  # only who is in it changed, and who joined is named
