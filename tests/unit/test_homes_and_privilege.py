"""The domain rules of issue 15: where a home may be (sup/domain/homes.py) and who may create or fill
a privileged group (sup/domain/privilege.py, with the names the target specs give)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sup.config import Settings
from sup.domain.homes import HomeIndex, InvalidHome, ancestors, check_home, clash, home_root, relation
from sup.domain.privilege import DEFAULT_WRITERS, may_write_privileged

LDAP = {"url": "ldap://ldap.invalid", "bind_dn": "cn=sup", "bind_password": "x", "base_dn": "dc=x"}


@pytest.mark.parametrize(
    ("template", "root"),
    [
        ("/home/{username}", "/home"),
        ("/srv/home/{username}", "/srv/home"),
        ("/srv/u-{username}/home", "/srv"),
        ("/{username}", "/"),
    ],
)
def test_home_root_is_the_directory_above_the_username(template: str, root: str) -> None:
    assert home_root(template) == root


@pytest.mark.parametrize("path", ["/home/kim", "/home/kim.wexler", "/home/a/b-c_d@e+f", "/home/K1m"])
def test_safe_homes_below_the_root(path: str) -> None:
    assert check_home(path, "/home") == path


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/", "below the home root"),
        ("/home", "below the home root"),
        ("/etc", "below the home root"),
        ("/etc/kim", "below the home root"),
        ("/homes/kim", "below the home root"),
        ("home/kim", "absolute"),
        ("/home/kim/", "plain path"),
        ("/home//kim", "plain path"),
        ("/home/./kim", "plain path"),
        ("/home/../etc", "plain path"),
        ("/home/kim\n", "only letters"),
        ("/home/ki m", "only letters"),
        ("/home/kim\u202egpj", "only letters"),
        ("/home/kim\u200f", "only letters"),
        ("/home/k\x00im", "only letters"),
        ("/home/k:im", "only letters"),
        ("/home/kïm", "only letters"),
        ("/home/" + "k" * 1020, "at most 1024"),
    ],
)
def test_unsafe_homes_are_refused(path: str, message: str) -> None:
    with pytest.raises(InvalidHome, match=message):
        check_home(path, "/home")


@pytest.mark.parametrize("template", ["/home/{username}/", "/home/{username} x", "/home/../{username}"])
def test_the_home_template_makes_safe_homes(template: str) -> None:
    with pytest.raises(ValueError, match="home_template"):
        Settings(accounts={"home_template": template})


def test_under_the_filesystem_root_anything_plain_but_the_root_itself() -> None:
    assert check_home("/kim", "/") == "/kim"
    with pytest.raises(InvalidHome):
        check_home("/", "/")


@given(st.text(min_size=1, max_size=40))
def test_no_accepted_home_holds_whitespace_control_or_escapes_the_root(tail: str) -> None:
    path = "/home/" + tail
    try:
        check_home(path, "/home")
    except InvalidHome:
        return
    assert not any(c.isspace() or not c.isprintable() for c in path)
    assert ".." not in path.split("/") and "" not in path[1:].split("/")
    assert path.startswith("/home/")


@pytest.mark.parametrize(
    ("home", "other", "expected"),
    [
        ("/home/alice", "/home/alice", "same"),
        ("/home/alice/.ssh", "/home/alice", "inside"),
        ("/home/alice/x/y", "/home/alice", "inside"),
        ("/home", "/home/alice", "contains"),
        ("/home/alice", "/home/alice/x", "contains"),
        ("/home/al", "/home/alice", None),  # component by component, not by characters
        ("/home/alice", "/home/al", None),
        ("/home/alice-x", "/home/alice", None),
        ("/home/alice", "/home/bob", None),
        ("/anything", "/", "inside"),
    ],
)
def test_homes_nest_component_by_component(home: str, other: str, expected: str | None) -> None:
    assert relation(home, other) == expected


def test_ancestors_are_the_directories_above() -> None:
    assert ancestors("/home/a/b") == ["/", "/home", "/home/a"]
    assert ancestors("/home") == ["/"] and ancestors("/") == []


def test_a_clash_names_the_person_and_how() -> None:
    holders = [("alice", "/home/alice"), ("carol", "/home/carol/x")]
    inside = clash("/home/alice/.ssh", holders)
    assert inside is not None and inside.owner == "alice" and inside.relation == "inside"
    assert inside.message() == (
        "'/home/alice/.ssh' lies inside the home '/home/alice' of user 'alice' "
        "(a group's login pod would mount one over the other)"
    )
    above = clash("/home/carol", holders)
    assert above is not None and above.relation == "contains" and "'carol'" in above.message()
    assert clash("/home/al", holders) is None
    assert clash("/home/alice/x", holders, exclude="alice") is None  # one's own home moves freely
    same = clash("/home/alice", [("bo", "/home/alice/x"), ("alice", "/home/alice")])
    assert same is not None and same.relation == "same"  # the equal home is said first
    assert "already used by another user ('alice')" in same.message()


_PATHS = st.lists(st.sampled_from(["a", "al", "alice", "b", "x", ".ssh"]), min_size=1, max_size=4).map(
    lambda parts: "/home/" + "/".join(parts)
)


@given(st.lists(st.tuples(st.sampled_from(["ann", "bo", "cy", "di"]), _PATHS), max_size=12), _PATHS)
def test_the_index_finds_what_comparing_with_everyone_finds(held: list[tuple[str, str]], home: str) -> None:
    """HomeIndex answers in O(depth) what `clash` answers by looking at every home."""
    index = HomeIndex(held)
    for exclude in (None, "ann"):
        slow = clash(home, held, exclude)
        fast = index.clash(home, exclude)
        assert (slow is None) == (fast is None), (held, home, exclude)
        if slow is not None and fast is not None:
            assert fast.relation == relation(home, fast.their_home) and fast.owner != exclude
            assert (fast.owner, fast.their_home) in held
            assert (slow.relation == "same") == (fast.relation == "same")


def test_privileged_group_writers() -> None:
    assert may_write_privileged(DEFAULT_WRITERS, "api") and may_write_privileged(DEFAULT_WRITERS, "import")
    assert not may_write_privileged(DEFAULT_WRITERS, "keycloak")
    assert not may_write_privileged(DEFAULT_WRITERS, "scim:okta")
    assert may_write_privileged(["scim:*"], "scim:okta") and not may_write_privileged(["scim:*"], "keycloak")
    assert may_write_privileged(["scim:okta"], "scim:okta") and not may_write_privileged(
        ["scim:okta"], "scim:o"
    )


def test_privileged_groups_come_from_the_enabled_targets_specs() -> None:
    assert Settings().privileged_groups() == frozenset()
    settings = Settings(
        ldap={**LDAP, "admin_groups": ["ops"]},
        slurm={"cluster": "c1", "admin_groups": {"hpc-admins": "Administrator", "hpc-ops": "Operator"}},
    )
    assert settings.privileged_groups() == {"ops", "hpc-admins", "hpc-ops"}
    assert Settings(slurm={"cluster": "c1"}).privileged_groups() == frozenset()


def test_privileged_group_writers_setting() -> None:
    assert Settings().sources.privileged_group_writers == ["api", "import"]
    settings = Settings(sources={"privileged_group_writers": ["api", "keycloak"]})
    assert settings.sources.may_write_privileged("keycloak")
    assert not settings.sources.may_write_privileged("import")
