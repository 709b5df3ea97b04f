"""Slurm names and limits: what sacctmgr can store and give back unchanged."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sup.domain.slurm import SlurmLimits, check_account_name, check_slurm_text


@pytest.mark.parametrize("name", ["physics", "proj.alpha-1", "lab_2", "0day"])
def test_account_names(name: str) -> None:
    assert check_account_name(name) == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("root", "Slurm's own"),
        ("Physics", "not valid"),
        ("a,b", "not valid"),
        ("a=b", "not valid"),
        ("a b", "not valid"),
        ("", "empty"),
        ("x" * 65, "longer than 64"),
    ],
)
def test_bad_account_names(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_account_name(name)


@pytest.mark.parametrize("text", ["a|b", "line\nbreak", 'say "hi"', "it's"])
def test_text_that_cannot_round_trip(text: str) -> None:
    with pytest.raises(ValueError, match="must not contain"):
        check_slurm_text(text, "description")


def test_limits() -> None:
    limits = SlurmLimits(
        grp_tres={"cpu": 512, "gres/gpu": "16", "mem": "2T"}, max_wall="2-00:00:00", max_jobs=10
    )
    assert limits.model_dump(exclude_none=True) == {
        "grp_tres": {"cpu": "512", "gres/gpu": "16", "mem": "2T"},
        "max_jobs": 10,
        "max_wall": "2-00:00:00",
    }


@pytest.mark.parametrize(
    "bad",
    [
        {"grp_tres": {"cpus": 1}},
        {"grp_tres": {"cpu": "-1"}},
        {"max_wall": "two days"},
        {"max_jobs": -1},
        {"GrpTRES": "cpu=1"},
    ],
)
def test_bad_limits(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        SlurmLimits.model_validate(bad)
