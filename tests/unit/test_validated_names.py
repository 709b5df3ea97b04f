"""Every name SUP validates matches its rule as a whole string.

A pattern ending in `$` used with `re.match` also accepts the same text followed by one newline:
`root\\n` passed as a username, skipped the reserved-name check (it is not `root`), was stored, and
broke the `Location` header of the answer. These properties hold for user, group, Slurm account, QOS,
partition and token names, and for the Slurm limits (TRES keys and amounts, wall times): an accepted
value contains no control character and no whitespace at all.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from sup.domain import fields
from sup.domain.posix import check_groupname, check_username
from sup.domain.slurm import SlurmLimits, check_account_name
from sup.errors import InvalidInput
from sup.tokens.service import check_token_name

Check = Callable[[str], object]


def _adapter(kind: Any) -> Check:
    adapter: TypeAdapter[str] = TypeAdapter(kind)
    return adapter.validate_python


CHECKS: dict[str, Check] = {
    "username": check_username,
    "group name": check_groupname,
    "account name": check_account_name,
    "token name": check_token_name,
    "Username field": _adapter(fields.Username),
    "GroupName field": _adapter(fields.GroupName),
    "AccountName field": _adapter(fields.AccountName),
    "QosName field": _adapter(fields.QosName),
    "PartitionName field": _adapter(fields.PartitionName),
}

# Control characters (C0, DEL, C1), and whitespace of every kind, line and paragraph separators included.
_bad_chars = st.one_of(
    st.sampled_from(["\n", "\r", "\t", " ", "\x0b", "\x0c", "\x00", "\x7f", "\x85", "\xa0", "\u2028"]),
    st.characters(categories=["Cc", "Zs", "Zl", "Zp"]),
)


def _taint(good: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A valid value with one bad character put at its end (where `$` lets a newline through), its
    start, or anywhere in between."""

    def put(value: str, char: str, where: int) -> str:
        at = len(value) if where < 0 else where % (len(value) + 1)
        return value[:at] + char + value[at:]

    return st.builds(put, good, _bad_chars, st.one_of(st.just(-1), st.integers(0, 64)))


_names = st.from_regex(r"[a-z_][a-z0-9_-]{0,20}", fullmatch=True)
_candidates = st.one_of(
    _taint(_names), _taint(st.sampled_from(["root", "sudo", "wheel"])), st.text(max_size=40)
)


def _is_clean(text: str) -> bool:
    return not any(c.isspace() or unicodedata.category(c).startswith("C") for c in text)


def _accepted(check: Check, text: str) -> str | None:
    try:
        result = check(text)
    except (ValueError, InvalidInput):  # ValidationError and InvalidName are ValueErrors
        return None
    assert isinstance(result, str)
    return result


@pytest.mark.parametrize("kind", sorted(CHECKS))
@given(text=_candidates)
@example(text="root\n")
@example(text="sudo\n")
@example(text="kim\n")
@example(text="kim\r\n")
def test_an_accepted_name_has_no_control_character_or_whitespace(kind: str, text: str) -> None:
    accepted = _accepted(CHECKS[kind], text)
    if accepted is not None:
        assert _is_clean(accepted), (kind, accepted)


@pytest.mark.parametrize("kind", sorted(CHECKS))
@pytest.mark.parametrize("text", ["root\n", "sudo\n", "kim\n", "phys\n", "kim\n\n", "\nkim", "kim\r"])
def test_a_trailing_or_leading_line_break_is_refused(kind: str, text: str) -> None:
    assert _accepted(CHECKS[kind], text) is None


_tres_keys = st.sampled_from(["cpu", "mem", "node", "gres/gpu", "license/matlab", "gres/gpu:a100"])
_tres_amounts = st.from_regex(r"[0-9]{1,6}[KMGTP]?", fullmatch=True)
_times = st.sampled_from(["60", "1:30", "2:00:00", "2-00", "2-00:00", "2-00:00:00"])


def _limits(**values: object) -> SlurmLimits | None:
    try:
        return SlurmLimits.model_validate(values)
    except ValidationError:
        return None


@given(key=st.one_of(_tres_keys, _taint(_tres_keys)), amount=st.one_of(_tres_amounts, _taint(_tres_amounts)))
@example(key="cpu\n", amount="1")
@example(key="cpu", amount="1\n")
def test_accepted_tres_have_no_control_character_or_whitespace(key: str, amount: str) -> None:
    limits = _limits(grp_tres={key: amount}, max_tres_per_job={key: amount})
    if limits is not None:
        for tres in (limits.grp_tres, limits.max_tres_per_job):
            assert tres is not None
            assert all(_is_clean(k) and _is_clean(v) for k, v in tres.items()), tres


@given(time=st.one_of(_times, _taint(_times)))
@example(time="2-00:00:00\n")
def test_accepted_wall_times_have_no_control_character_or_whitespace(time: str) -> None:
    limits = _limits(max_wall=time, grp_wall=time)
    if limits is not None:
        assert _is_clean(limits.max_wall or "") and _is_clean(limits.grp_wall or ""), limits


@pytest.mark.parametrize("amount", ["١٢", "12\n", "¹"])
def test_tres_amounts_are_ascii_digits(amount: str) -> None:
    assert _limits(grp_tres={"cpu": amount}) is None


@pytest.mark.parametrize("time", ["٢-00:00:00", "60\n", "1:30\n"])
def test_wall_times_are_ascii_digits(time: str) -> None:
    assert _limits(max_wall=time) is None
