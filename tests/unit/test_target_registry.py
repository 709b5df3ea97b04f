"""The target registry: the names, the settings sections and the typed view of them agree, and the
specs stay light to import."""

from __future__ import annotations

import subprocess
import sys
import typing

import pytest

from sup.config import Settings
from sup.targets.registry import SPECS, TARGET_NAMES, TargetSections, find


def test_settings_have_one_optional_section_per_registered_target() -> None:
    for spec in SPECS:
        field = Settings.model_fields[spec.name]
        assert field.default is None
        assert typing.get_args(field.annotation) == (spec.settings_model, type(None))
    assert TARGET_NAMES == ("ldap", "slurm", "kube")


def test_the_typed_sections_match_the_registry() -> None:
    hints = typing.get_type_hints(TargetSections)
    assert list(hints) == list(TARGET_NAMES)
    for spec in SPECS:
        assert typing.get_args(hints[spec.name]) == (spec.settings_model, type(None))


def test_a_section_is_read_typed_and_an_absent_one_disables_the_target() -> None:
    settings = Settings(database_url="sqlite://", slurm={"cluster": "c"})
    slurm = find("slurm")
    section = settings.target_settings(slurm)
    assert isinstance(section, slurm.settings_model) and settings.target_enabled("slurm")
    assert settings.target_settings(find("kube")) is None and not settings.target_enabled("kube")
    with pytest.raises(ValueError, match="targets are ldap, slurm, kube"):
        find("nfs")


def test_loading_settings_does_not_load_a_target_client() -> None:
    code = (
        "import sys, sup.config, sup.cli, sup.reconcile.planner\n"
        "print(sorted(m for m in ('kubernetes', 'ldap3', 'jinja2') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
