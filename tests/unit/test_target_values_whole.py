"""The targets' own value rules match the whole text, as the domain's names do (test_validated_names.py).

`re.match` with a pattern ending in `$` also accepts the text followed by one newline: `root\\n` in
`slurm.ignore_users` passed the name check but is not `root`, so the real root was no longer ignored;
a Kubernetes label value or retention `7d\\n` was taken and then refused by the API server on every
pass. Each case here was accepted before.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import ValidationError

from sup.targets.kube import values
from sup.targets.slurm.settings import SlurmSettings


def _slurm(**section: object) -> SlurmSettings:
    return SlurmSettings.model_validate({"cluster": "c1", **section})


@pytest.mark.parametrize(
    "section",
    [
        {"cluster": "c1\n"},
        {"clusters": ["c2\n"]},
        {"ignore_users": ["root\n"]},
        {"ignore_accounts": ["root\n"]},
    ],
)
def test_slurm_names_in_settings_refuse_a_trailing_newline(section: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="not a valid Slurm name"):
        _slurm(**section)


KUBE_CHECKS: list[tuple[Callable[[str], object], str]] = [
    (values.dns_label, "login"),
    (values.label_key, "example.org/team"),
    (values.label_value, "gpu"),
    (values.positive_quantity, "10Gi"),
    (values.parse_retention, "7d"),
]


@pytest.mark.parametrize(("check", "good"), KUBE_CHECKS)
@pytest.mark.parametrize("bad", ["\n", "\r\n", " \n", "\t"])
def test_kubernetes_values_refuse_trailing_whitespace(
    check: Callable[[str], object], good: str, bad: str
) -> None:
    check(good)
    with pytest.raises(values.InvalidValue):
        check(good + bad)


def test_retention_takes_ascii_digits_only() -> None:
    with pytest.raises(values.InvalidValue):
        values.parse_retention("\u0661\u0662d")  # Arabic-Indic digits one, two
