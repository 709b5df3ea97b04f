"""Names: every POSIX user or group name gives valid, distinct Kubernetes names (pure)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from sup.domain.posix import MAX_NAME_LENGTH, NAME_PATTERN
from sup.targets.kube.names import Owner, home_claim, key

DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
DNS_1035 = re.compile(r"^[a-z]([a-z0-9-]*[a-z0-9])?$")  # Service names
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

posix_names = st.from_regex(NAME_PATTERN, fullmatch=True).filter(lambda n: len(n) <= MAX_NAME_LENGTH)


def test_plain_names_stay_as_they_are_and_others_get_a_slug_and_a_hash() -> None:
    assert key("kim") == "kim"
    assert key("a-b") == "a-b"
    assert key("a_b") == "a-b---648fa9b31b"
    assert key("a--b").startswith("a-b---")  # never equal to a plain name, which has no "--"
    assert key("_") == "x---d2e2adf717"
    assert key("build-") == "build---072dfd35b9"
    assert Owner("user", "kim").legacy_home == "home-kim" and Owner("user", "kim").login == "login-kim"
    assert Owner("group", "kim").login == "group-kim"  # a group and a user of one name never clash
    assert home_claim(10001) == "home-u10001" and DNS_LABEL.match(home_claim(2**31 - 1))


@given(posix_names)
def test_every_posix_name_gives_valid_names(name: str) -> None:
    k = key(name)
    assert LABEL_VALUE.match(k) and len(k) <= 39
    for owner in (Owner("user", name), Owner("group", name)):
        assert DNS_1035.match(owner.login) and len(owner.login) <= 52  # StatefulSet pods' hash label
        assert DNS_LABEL.match(owner.legacy_home)
        assert all(LABEL_VALUE.match(v) for v in owner.pod_labels().values())


@given(posix_names, posix_names)
def test_different_names_give_different_keys(one: str, other: str) -> None:
    if one != other:
        assert key(one) != key(other)
