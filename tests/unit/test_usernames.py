"""Deriving POSIX usernames from IdP logins: deterministic, configurable, never merging people."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sup.domain.posix import InvalidName, check_username
from sup.domain.usernames import UsernameRule, derive_username, find_collisions


@pytest.mark.parametrize(
    ("login", "expected"),
    [
        ("Kim.Wexler@corp.example", "kim_wexler"),
        ("kim", "kim"),
        ("José.Núñez@uni.example", "jose_nunez"),
        ("o'brien@corp.example", "o_brien"),
        ("a..b@x", "a_b"),
        ("  spaced@x ", "spaced"),
        ("weird@name@corp.example", "weird_name"),
    ],
)
def test_default_rule(login: str, expected: str) -> None:
    assert derive_username(login) == expected


def test_full_strategy_keeps_the_domain() -> None:
    rule = UsernameRule(strategy="full", replacement="-")
    assert derive_username("Kim.Wexler@corp.example", rule) == "kim-wexler-corp-example"


def test_replacement_can_drop_characters() -> None:
    assert derive_username("Kim.Wexler@corp.example", UsernameRule(replacement="")) == "kimwexler"


def test_leading_digit() -> None:
    with pytest.raises(InvalidName, match="starts with a digit"):
        derive_username("2pac@music.example")
    assert derive_username("2pac@music.example", UsernameRule(leading_digit_prefix="u")) == "u2pac"


def test_too_long_is_refused_not_truncated() -> None:
    with pytest.raises(InvalidName, match="longer than 32"):
        derive_username("a" * 40 + "@x")


def test_reserved_result_refused() -> None:
    with pytest.raises(InvalidName, match="reserved"):
        derive_username("Root@corp.example")
    with pytest.raises(InvalidName, match="reserved"):
        derive_username("kim@x", UsernameRule(extra_reserved=frozenset({"kim"})))


def test_nothing_usable() -> None:
    with pytest.raises(InvalidName, match="no characters usable"):
        derive_username("...@corp.example")
    with pytest.raises(InvalidName, match="empty"):
        derive_username("   ")


def test_collisions_are_reported_not_merged() -> None:
    logins = ["Kim.Wexler@corp.example", "kim_wexler@other.example", "KIM.WEXLER@corp.example", "saul@x"]
    assert find_collisions(logins) == {
        "kim_wexler": ["KIM.WEXLER@corp.example", "Kim.Wexler@corp.example", "kim_wexler@other.example"]
    }
    assert find_collisions(["a@x", "b@x"]) == {}


@given(st.text(max_size=60))
def test_result_is_always_a_valid_username_and_deterministic(login: str) -> None:
    try:
        name = derive_username(login)
    except InvalidName:
        return
    assert check_username(name) == name
    assert derive_username(login) == name
