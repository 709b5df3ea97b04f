"""DN escaping, parsing and comparison (pure): any value stays one value of one RDN."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sup.targets.ldap import dn as dnlib

PARENT = "ou=people,dc=example,dc=org"
PARENT_RDNS = [(("ou", "people"),), (("dc", "example"),), (("dc", "org"),)]


@given(st.text(max_size=40))
def test_any_value_is_one_rdn_below_its_parent(value: str) -> None:
    dn = dnlib.child_dn("uid", value, PARENT)
    assert dnlib.parse_dn(dn) == [(("uid", value),), *PARENT_RDNS]
    assert dnlib.is_under(dnlib.normalize(dn), dnlib.normalize(PARENT))
    assert dnlib.parent_of(dn).lower() == PARENT
    assert dnlib.first_rdn(dn) == (("uid", value),)


@given(st.text(max_size=20), st.text(max_size=20))
def test_different_values_never_name_the_same_entry(a: str, b: str) -> None:
    same = dnlib.normalize(dnlib.child_dn("cn", a, PARENT)) == dnlib.normalize(
        dnlib.child_dn("cn", b, PARENT)
    )
    assert same == (a.lower() == b.lower())


@given(
    st.text(alphabet="abcxyzABC0123456789._@-", min_size=1, max_size=12),
    st.text(alphabet="abcXYZ09-", min_size=1, max_size=8),
)
def test_the_fast_path_agrees_with_the_parser(value: str, ou: str) -> None:
    dn = f"UID={value},OU={ou},DC=Example"
    expected = ",".join(
        "+".join(f"{t}={dnlib.escape_value(v.lower())}" for t, v in rdn) for rdn in dnlib.parse_dn(dn)
    )
    assert dnlib.normalize(dn) == expected == dn.lower()


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("a,b", "a\\,b"),
        ("a+b", "a\\+b"),
        ('a"b', 'a\\"b'),
        ("a\\b", "a\\\\b"),
        ("<a>;", "\\<a\\>\\;"),
        ("a=b", "a\\=b"),
        ("#a#", "\\#a#"),
        (" a ", "\\ a\\ "),
        ("nul\x00x", "nul\\00x"),
        ("line\nbreak", "line\\0abreak"),
        ("*()", "*()"),  # special in filters, not in DNs
        ("jürgen", "jürgen"),
    ],
)
def test_escape_value(value: str, escaped: str) -> None:
    assert dnlib.escape_value(value) == escaped


def test_parsing_is_lenient_where_rfc_2253_was() -> None:
    assert dnlib.normalize("UID = Kim , OU=People,dc=Example") == "uid=kim,ou=people,dc=example"
    assert dnlib.parse_dn("cn=J\\C3\\BCrgen,dc=x") == [(("cn", "Jürgen"),), (("dc", "x"),)]
    assert dnlib.parse_dn("cn=a+sn=b,dc=x") == [(("cn", "a"), ("sn", "b")), (("dc", "x"),)]
    assert dnlib.normalize("sn=b+cn=a,dc=x") == dnlib.normalize("cn=a+sn=b,dc=x")
    assert dnlib.normalize("") == "" and dnlib.depth("cn=a,dc=x") == 2


@pytest.mark.parametrize(
    "bad", ["uid", "uid=a,", "=a,dc=x", "uid=a\\", 'uid=a"b', "uid=a,,dc=x", "u id=a", "cn=\\ff"]
)
def test_malformed_dns_are_refused(bad: str) -> None:
    with pytest.raises(dnlib.InvalidDn):
        dnlib.normalize(bad)


def test_is_under_needs_a_whole_rdn_boundary() -> None:
    parent = dnlib.normalize("ou=people,dc=x")
    assert dnlib.is_under("uid=a,ou=people,dc=x", parent)
    assert not dnlib.is_under("ou=people,dc=x", parent)
    assert not dnlib.is_under("uid=a,ou=xpeople,dc=x", parent)
    assert not dnlib.is_under(
        dnlib.normalize(dnlib.child_dn("uid", "a,ou=people,dc=x", "ou=other,dc=x")), parent
    )
    with pytest.raises(dnlib.InvalidDn):
        dnlib.child_dn("not an attribute", "a", parent)
