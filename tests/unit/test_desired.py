"""The desired state: who is provisioned, what a deactivated user looks like, who is a member."""

from __future__ import annotations

import dataclasses

from sup.domain.desired import Policy, StoredAccount, StoredGroup, StoredUser, StoreSnapshot, derive


def user(name: str, uid: int, *, active: bool = True, groups: frozenset[str] = frozenset()) -> StoredUser:
    return StoredUser(
        username=name, uid_number=uid, primary_gid=uid, display_name=None, given_name="G", family_name="F",
        email=None, login_shell="/bin/bash", home_directory=f"/home/{name}",
        ssh_public_keys=("ssh-ed25519 AAAA k",), active=active, groups=groups,
    )  # fmt: skip


def snapshot(*users: StoredUser, access: frozenset[str] = frozenset()) -> StoreSnapshot:
    groups = [StoredGroup(u.username, u.uid_number, None, frozenset(), private_for=u.username) for u in users]
    members = frozenset(u.username for u in users if "physics" in u.groups)
    groups.append(StoredGroup("physics", 50000, "Physics", members, None))
    groups.append(StoredGroup("empty", 50001, None, frozenset(), None))
    account = StoredAccount("phys", "root", None, None, 10, (), None, (), {}, group="physics")
    return StoreSnapshot(users=tuple(users), groups=tuple(groups), accounts=(account,))


def test_everybody_active_is_provisioned_with_their_groups() -> None:
    state = derive(snapshot(user("kim", 10000, groups=frozenset({"physics"})), user("saul", 10001)), Policy())
    assert set(state.users) == {"kim", "saul"}
    assert state.groups["physics"].members == {"kim"}
    assert state.groups["kim"].private and state.groups["kim"].gid_number == 10000
    assert state.groups["empty"].members == frozenset()  # empty groups still exist
    assert state.accounts["phys"].members == {"kim"}
    assert state.users["kim"].cn == "G F"


def test_deactivated_user_is_locked_everywhere() -> None:
    kim = user("kim", 10000, active=False, groups=frozenset({"physics"}))
    state = derive(snapshot(kim), Policy(nologin_shell="/usr/sbin/nologin"))
    locked = state.users["kim"]
    assert not locked.active and locked.ssh_public_keys == () and locked.login_shell == "/usr/sbin/nologin"
    assert state.groups["physics"].members == frozenset()
    assert state.accounts["phys"].members == frozenset()
    assert "kim" in state.groups  # the private group stays while the user is locked


def test_access_groups_limit_who_is_provisioned() -> None:
    kim = user("kim", 10000, groups=frozenset({"physics"}))
    saul = user("saul", 10001)
    state = derive(snapshot(kim, saul), Policy(access_groups=frozenset({"physics"})))
    assert set(state.users) == {"kim"}
    assert "saul" not in state.groups  # no private group for somebody not provisioned
    assert "physics" in state.groups and "empty" in state.groups


def test_default_account_and_coordinators_follow_the_store() -> None:
    kim = user("kim", 10000, groups=frozenset({"physics"}))
    locked = user("saul", 10001, active=False, groups=frozenset({"physics"}))
    kim = dataclasses.replace(kim, default_account="phys")
    base = snapshot(kim, locked)
    account = StoredAccount(
        "phys", "root", None, None, 10, (), None, (), {}, group="physics", coordinators="physics"
    )
    state = derive(StoreSnapshot(base.users, base.groups, (account,)), Policy())
    assert state.users["kim"].default_account == "phys" and state.users["saul"].default_account is None
    assert state.accounts["phys"].coordinators == {"kim"}  # a locked user coordinates nothing
    no_group = derive(base, Policy())
    assert no_group.accounts["phys"].coordinators == frozenset()


def test_login_pods_take_plain_keys_unless_the_policy_says_certificates_only() -> None:
    """The default keeps keys in the pods; certificates only (ssh_ca.plain_keys false) says so in the
    state, and the people's keys stay in it for the targets that still take them (LDAP)."""
    kim = user("kim", 10000)
    assert derive(snapshot(kim), Policy()).plain_keys_in_login_pods
    certificates_only = derive(snapshot(kim), Policy(plain_keys_in_login_pods=False))
    assert not certificates_only.plain_keys_in_login_pods
    assert certificates_only.users["kim"].ssh_public_keys == ("ssh-ed25519 AAAA k",)
