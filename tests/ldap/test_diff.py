"""diff without a server: a plan's details say exactly what to write, so applying them (simulated on
the observed entries) leaves nothing to do; plus the rules for collisions, unknown entries,
deactivation, refusals and membership subjects."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sup.domain.desired import DesiredState, Policy
from sup.domain.gecos import gecos_text
from sup.targets.base import CREATE, REPORT
from sup.targets.ldap import dn as dnlib
from sup.targets.ldap.diff import plan
from sup.targets.ldap.entries import ascii_mail, wanted_entries
from sup.targets.ldap.layout import Layout
from sup.targets.ldap.model import Observed, ObservedEntry
from tests.ldap.plans import BASE, EMPTY, PLACEHOLDER, layout, simulate, state, user

NAMES = ["ann", "bob", "cy", "dee"]
KEYS = ["ssh-ed25519 AAAAone a", "ssh-ed25519 AAAAtwo b", "ssh-rsa AAAAthree c"]


@st.composite
def desired_states(draw: st.DrawFn) -> DesiredState:
    users = []
    for i, name in enumerate(draw(st.lists(st.sampled_from(NAMES), unique=True))):
        users.append(
            user(
                name,
                10000 + i,
                active=draw(st.booleans()),
                keys=tuple(draw(st.lists(st.sampled_from(KEYS), unique=True))),
                display_name=draw(st.sampled_from([None, "Ann Émile", 'Bob "B" (x), y=z+1 <#;\\*>'])),
                email=draw(st.sampled_from([None, "a@example.org", "b@exämple.org", "ü@example.org"])),
                login_shell=draw(st.sampled_from(["/bin/bash", "/bin/zsh"])),
            )
        )
    names = [u.username for u in users]
    groups = {
        group: (50000 + i, frozenset(draw(st.lists(st.sampled_from(names), unique=True)) if names else ()))
        for i, group in enumerate(draw(st.lists(st.sampled_from(["g1", "g2", "ops"]), unique=True)))
    }
    return state(users, groups)


SHAPES = st.builds(
    layout,
    schema=st.sampled_from(["rfc2307bis", "rfc2307"]),
    deactivated=st.sampled_from(["lock", "delete"]),
    admin_groups=st.sampled_from([(), ("ops",)]),
)


@settings(max_examples=60, deadline=None)
@given(desired_states(), desired_states(), SHAPES)
def test_applying_a_plan_leaves_nothing_to_do(
    first: DesiredState, second: DesiredState, shape: Layout
) -> None:
    observed = EMPTY
    for desired in (first, second):
        changes = plan(desired, observed, shape)
        assert all(c.subject is not None for c in changes if c.kind == "user" and c.action != REPORT)
        observed = simulate(observed, changes, shape)
        assert [c for c in plan(desired, observed, shape) if c.action != REPORT] == []


def test_a_first_plan_creates_ous_then_users_then_groups_with_members() -> None:
    desired = state(
        [user("ann", 10000), user("bob", 10001)],
        {"physics": (50000, frozenset({"ann"})), "empty": (50001, frozenset())},
    )
    changes = plan(desired, EMPTY, layout())
    assert [(c.action, c.kind, c.name) for c in changes] == [
        ("create", "ou", f"ou=groups,{BASE}"),
        ("create", "ou", f"ou=people,{BASE}"),
        ("create", "ou", f"ou=SUDOers,{BASE}"),
        ("create", "user", "ann"),
        ("create", "user", "bob"),
        ("create", "group", "ann"),
        ("create", "group", "bob"),
        ("create", "group", "empty"),
        ("create", "group", "physics"),
    ]
    groups = {c.name: c.details_json() for c in changes if c.kind == "group"}
    assert groups["physics"]["member"] == {"old": None, "new": [f"uid=ann,ou=people,{BASE}"]}
    assert groups["empty"]["member"] == {"old": None, "new": [PLACEHOLDER]}
    assert groups["ann"]["objectClass"] == {"old": None, "new": ["groupOfNames", "posixGroup"]}
    assert [c.subject for c in changes if c.kind == "group"] == ["ann", "bob", None, None]

    rfc2307 = {
        c.name: c.details_json() for c in plan(desired, EMPTY, layout(schema="rfc2307")) if c.kind == "group"
    }
    assert rfc2307["physics"]["memberUid"] == {"old": None, "new": ["ann"]}
    assert "memberUid" not in rfc2307["empty"] and rfc2307["empty"]["objectClass"]["new"] == ["posixGroup"]


def _converged(desired: DesiredState, shape: Layout) -> Observed:
    return simulate(EMPTY, plan(desired, EMPTY, shape), shape)


def _foreign(dn: str, classes: tuple[str, ...], **attributes: str) -> ObservedEntry:
    return ObservedEntry(dn, {"objectclass": classes, **{k.lower(): (v,) for k, v in attributes.items()}})


def test_collisions_are_reported_for_their_user_and_nothing_is_written_for_them() -> None:
    shape = layout(admin_groups=("ops",))
    desired = state(
        [user("ann", 10000), user("bob", 10001), user("cy", 10002)],
        {"ops": (50000, frozenset({"ann", "bob", "cy"})), "g": (50001, frozenset({"bob"}))},
    )
    foreign = (
        _foreign(f"uid=old,ou=staff,{BASE}", ("posixAccount",), uid="old", uidNumber="10000"),
        _foreign(f"uid=bob,ou=staff,{BASE}", ("posixAccount",), uid="BOB", uidNumber="3"),
        _foreign(f"cn=g,ou=staff,{BASE}", ("posixGroup",), cn="other", gidNumber="50001"),
        _foreign(f"uid=x,ou=staff,{BASE}", ("posixAccount",), uid="*", uidNumber="10002x"),
    )
    changes = plan(desired, Observed(frozenset(), {}, foreign), shape)
    reports = {(c.kind, c.name, c.subject): c.details_json()["error"] for c in changes if c.action == REPORT}
    assert set(reports) == {("user", "ann", "ann"), ("user", "bob", "bob"), ("group", "g", None)}
    assert f"uidNumber 10000 is already used by uid=old,ou=staff,{BASE}" in str(reports["user", "ann", "ann"])
    assert "uid bob is already used by" in str(reports["user", "bob", "bob"])
    assert "gidNumber 50001 is already used by" in str(reports["group", "g", None])
    written = {(c.kind, c.name) for c in changes if c.action != REPORT}
    assert ("user", "ann") not in written and ("user", "bob") not in written and ("group", "g") not in written
    assert ("user", "cy") in written  # a foreign uid "*" matches nothing but "*"
    ops = next(c for c in changes if c.kind == "group" and c.name == "ops")
    assert ops.details_json()["member"]["new"] == [f"uid=cy,ou=people,{BASE}"]  # blocked users are not added


def test_unknown_entries_are_deleted_or_reported_and_children_go_first() -> None:
    shape = layout()
    desired = state([user("ann", 10000)], {})
    observed = _converged(desired, shape)
    extra = {
        f"uid=zed,ou=people,{BASE}": _foreign(
            f"uid=zed,ou=people,{BASE}", ("inetOrgPerson", "posixAccount"), uid="zed"
        ),
        f"ou=x,ou=groups,{BASE}": _foreign(f"ou=x,ou=groups,{BASE}", ("organizationalUnit",)),
        f"cn=y,ou=x,ou=groups,{BASE}": _foreign(f"cn=y,ou=x,ou=groups,{BASE}", ("device",)),
    }
    observed = Observed(
        observed.containers, {**observed.entries, **{dnlib.normalize(k): v for k, v in extra.items()}}, ()
    )
    deleted = [(c.action, c.kind, c.name, c.subject) for c in plan(desired, observed, shape)]
    assert deleted == [
        ("delete", "entry", "y", None),
        ("delete", "ou", "x", None),
        ("delete", "user", "zed", "zed"),
    ]
    reported = plan(desired, observed, layout(unknown_entries="report"))
    assert {c.action for c in reported} == {REPORT} and all("reason" in c.details_json() for c in reported)


def test_deactivation_locks_or_deletes() -> None:
    active = state([user("ann", 10000, keys=(KEYS[0],))], {"g": (50000, frozenset({"ann"}))})
    locked = state([user("ann", 10000, keys=(KEYS[0],), active=False)], {"g": (50000, frozenset({"ann"}))})
    observed = _converged(active, layout())
    lock = {(c.action.value, c.name): c.details_json() for c in plan(locked, observed, layout())}
    assert set(lock) == {("update", "ann"), ("remove_members", "g"), ("add_members", "g")}  # placeholder in
    assert lock["update", "ann"]["loginShell"] == {"old": "/bin/bash", "new": "/usr/sbin/nologin"}
    assert lock["update", "ann"]["sshPublicKey"] == {"old": KEYS[0], "new": None}
    assert lock["add_members", "g"]["member"] == {"old": None, "new": PLACEHOLDER}
    gone = plan(locked, observed, layout(deactivated="delete", unknown_entries="report"))
    assert {(c.action, c.kind, c.name, c.subject) for c in gone} == {
        ("delete", "user", "ann", "ann"),
        ("delete", "group", "ann", "ann"),
        ("remove_members", "group", "g", "ann"),
        ("add_members", "group", "g", None),
    }


def test_membership_compares_dns_not_spellings_and_names_the_user() -> None:
    shape = layout()
    desired = state([user("ann", 10000), user("bob", 10001)], {"g": (50000, frozenset({"ann"}))})
    observed = _converged(desired, shape)
    key = dnlib.normalize(f"cn=g,ou=groups,{BASE}")
    group = observed.entries[key]
    respelled = {
        **group.attributes,
        "member": (f"UID=ann, OU=People,{BASE.upper()}", f"uid=bob,ou=people,{BASE}", "cn=stranger"),
    }
    observed = Observed(
        observed.containers, {**observed.entries, key: ObservedEntry(group.dn, respelled)}, ()
    )
    assert {(c.action, c.subject) for c in plan(desired, observed, shape)} == {
        ("remove_members", "bob"),
        ("remove_members", None),
    }


def test_names_and_values_the_directory_cannot_hold_are_refused() -> None:
    desired = state(
        [user("ann", 10000), user("bad,name", 10001), user("eve", 10002, display_name="nul\x00")],
        {"g": (50000, frozenset({"ann", "bad,name", "eve"}))},
    )
    changes = plan(desired, EMPTY, layout())
    refused = {(c.kind, c.name): str(c.details_json()["error"]) for c in changes if c.action == REPORT}
    assert set(refused) == {("user", "bad,name"), ("group", "bad,name"), ("user", "eve")}
    assert "contains characters that are not allowed" in refused["user", "bad,name"]
    assert "contains a control character" in refused["user", "eve"]
    group = next(c for c in changes if c.kind == "group" and c.name == "g")
    assert group.details_json()["member"]["new"] == [f"uid=ann,ou=people,{BASE}"]


def test_admin_groups_get_a_sudo_role_and_missing_ones_are_reported() -> None:
    desired = state([user("ann", 10000)], {"ops": (50000, frozenset({"ann"}))})
    changes = plan(desired, EMPTY, layout(admin_groups=("ops", "nosuch"), sudo_options=()))
    sudo = next(c for c in changes if c.kind == "sudo_role" and c.action == CREATE)
    assert sudo.details_json()["dn"] == f"cn=ops,ou=SUDOers,{BASE}"
    assert sudo.details_json()["sudoUser"]["new"] == "%ops" and "sudoOption" not in sudo.details_json()
    missing = next(c for c in changes if c.action == REPORT)
    assert missing.name == "nosuch" and "error" not in missing.details_json()


@pytest.mark.parametrize(
    ("email", "written"),
    [
        ("kim@example.org", "kim@example.org"),
        ("kim@exämple.org", "kim@xn--exmple-cua.org"),
        ("kïm@example.org", None),
        (None, None),
    ],
)
def test_mail_is_written_in_ascii_or_not_at_all(email: str | None, written: str | None) -> None:
    assert ascii_mail(email) == written


def test_gecos_is_ascii() -> None:
    assert gecos_text("Jürgen  Müller-Łukasz", "x") == "Jurgen Muller-ukasz"
    assert gecos_text("王小明", "wang") == "wang"


def test_gecos_has_no_colon() -> None:
    wanted = wanted_entries(state([user("kim", 10001, display_name="Kim: Wexler")], {}), layout())
    kim = wanted.entries[dnlib.normalize(layout().user_dn("kim"))]
    assert kim.attributes["gecos"] == ("Kim Wexler",) and kim.attributes["cn"] == ("Kim: Wexler",)


def test_certificates_only_in_login_pods_leaves_the_directorys_keys_as_they_are() -> None:
    """ssh_ca.plain_keys false holds where SUP lets people in (the gateway, the login pods); LDAP
    still gets people's keys, for the site's own machines (docs/ssh-certificates.md)."""
    users, groups = [user("ann", 10000, keys=(KEYS[0], KEYS[1]))], {"physics": (50000, frozenset({"ann"}))}
    certificates_only = state(users, groups, Policy(plain_keys_in_login_pods=False))
    assert not certificates_only.plain_keys_in_login_pods
    changes = plan(certificates_only, EMPTY, layout())
    assert [c.details_json() for c in changes] == [
        c.details_json() for c in plan(state(users, groups), EMPTY, layout())
    ]
    (ann,) = [c for c in changes if c.kind == "user"]
    assert ann.details_json()["sshPublicKey"] == {"old": None, "new": sorted(KEYS[:2])}
