"""gecos: the passwd entry's comment field, derived from the display name.

`getent passwd` prints `name:x:uid:gid:gecos:home:shell`; a `:` in gecos shifts every field after it
for whoever parses that line (login tools, sssd's consumers, scripts), and a control character breaks
the line. RFC 2307 makes gecos an IA5 (ASCII) string.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sup.domain.desired import DesiredUser
from sup.domain.gecos import gecos_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Kim Wexler", "Kim Wexler"),
        ("Dr. Kim: Physics", "Dr. Kim Physics"),
        ("kim:x:0:0:root:/root:/bin/bash", "kim x 0 0 root /root /bin/bash"),
        ("Kim\x1bWexler\x7f", "Kim Wexler"),
        ("Kim\tWexler", "Kim Wexler"),
        ("Jürgen  Müller-Łukasz", "Jurgen Muller-ukasz"),  # accents folded, what has no ASCII form dropped
        ('Kim "K" (admin), x=y+z <a> #1; back\\slash *', 'Kim "K" (admin), x=y+z <a> #1; back\\slash *'),
        (":::", "kim"),
        ("王小明", "kim"),
        ("", "kim"),
    ],
)
def test_gecos_text(text: str, expected: str) -> None:
    assert gecos_text(text, "kim") == expected


@given(st.text(max_size=60))
def test_gecos_is_one_ascii_passwd_field(text: str) -> None:
    value = gecos_text(text, "kim")
    assert value and value.isascii() and value.isprintable()
    assert ":" not in value and value == value.strip()


_KIM = DesiredUser(
    username="kim",
    uid_number=10001,
    gid_number=10001,
    display_name="Kim: Wexler",
    given_name=None,
    family_name=None,
    email=None,
    home_directory="/home/kim",
    login_shell="/bin/bash",
    ssh_public_keys=(),
    active=True,
)


def test_a_desired_users_gecos_comes_from_their_display_name_without_colons() -> None:
    assert _KIM.cn == "Kim: Wexler"  # cn keeps the name as given
    assert _KIM.gecos == "Kim Wexler"
    no_name = dataclasses.replace(_KIM, display_name=None, given_name="Kim", family_name="Wex:ler")
    assert no_name.gecos == "Kim Wex ler"
    assert dataclasses.replace(_KIM, display_name="::").gecos == "kim"
