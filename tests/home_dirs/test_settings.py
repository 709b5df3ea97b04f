"""The `home_dirs` settings section: what it refuses, with the field named."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sup.config import Settings
from sup.config.home_dirs import HomeDirsSettings, quantity_bytes


def test_defaults_and_sizes() -> None:
    section = HomeDirsSettings(namespace="sup-users")
    assert (section.mount, section.home_root, section.quota, section.size_bytes) == (
        "/srv/homes", "/home", "none", 10 * 1024**3,
    )  # fmt: skip
    assert quantity_bytes("500Mi") == 500 * 1024**2 and quantity_bytes("2G") == 2 * 10**9
    assert Settings().home_dirs is None  # absent by default: SUP itself never reads it


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("namespace", "Not_A_Label"),
        ("mount", "relative/path"),
        ("mount", "/"),
        ("mount", "/srv/../etc"),
        ("home_root", "/home/"),
        ("size", "10 GB"),
        ("size", "0"),
        ("quota", "zfs"),
        ("resync_seconds", 0),
    ],
)
def test_bad_values_are_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as refused:
        HomeDirsSettings.model_validate({"namespace": "users", field: value})
    assert refused.value.errors()[0]["loc"] == (field,)


def test_an_unknown_key_is_refused() -> None:
    with pytest.raises(ValidationError):
        HomeDirsSettings.model_validate({"namespace": "users", "mount_path": "/srv"})
