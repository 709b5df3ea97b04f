"""POSIX names: the rule, the reserved list, and that nothing LDAP-special gets through."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sup.domain.posix import InvalidName, check_groupname, check_name, check_username

LDAP_SPECIAL = set('*()\\,=+<>#;"\x00/') | {" ", ":", "'", "\n"}


@pytest.mark.parametrize("name", ["kim", "_svc", "kim-wexler", "kim_w", "a", "k9", "a" * 32])
def test_valid(name: str) -> None:
    assert check_username(name) == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "must not be empty"),
        ("a" * 33, "33 characters long; at most 32"),
        ("Kim", "not allowed"),
        ("9lives", "must start with"),
        ("-kim", "must start with"),
        ("kim.wexler", "not allowed \\('\\.'\\)"),
        ("kim wexler", "not allowed"),
        ("kim$", "not allowed"),
        ("kïm", "not allowed"),
    ],
)
def test_invalid_with_reason(name: str, message: str) -> None:
    with pytest.raises(InvalidName, match=message):
        check_username(name)


@pytest.mark.parametrize("name", ["root", "daemon", "bin", "nobody", "slurm", "munge", "sshd", "postgres"])
def test_reserved_usernames_refused(name: str) -> None:
    with pytest.raises(InvalidName, match="reserved"):
        check_username(name)


@pytest.mark.parametrize("name", ["wheel", "sudo", "docker", "adm", "users", "root"])
def test_reserved_group_names_refused(name: str) -> None:
    with pytest.raises(InvalidName, match="reserved"):
        check_groupname(name)


def test_extra_reserved_names() -> None:
    with pytest.raises(InvalidName, match="reserved"):
        check_username("backupadm", extra_reserved=["backupadm"])
    assert check_username("kim", extra_reserved=["backupadm"]) == "kim"


@pytest.mark.parametrize("char", sorted(LDAP_SPECIAL))
def test_ldap_and_passwd_special_characters_refused(char: str) -> None:
    with pytest.raises(InvalidName):
        check_name(f"kim{char}x")


@given(st.text(max_size=40))
def test_anything_accepted_is_safe(text: str) -> None:
    try:
        name = check_name(text)
    except InvalidName:
        return
    assert re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", name)
    assert not (set(name) & LDAP_SPECIAL)
