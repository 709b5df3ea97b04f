"""docs/configuration.md is generated from the settings models (sup/config/reference.py): the committed
file must be what the generator prints, and every setting must say what it is for."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from sup.config import Settings
from sup.config.describe import item_model_of, model_of, yaml_value
from sup.config.reference import REGENERATE, doc_of, render

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def sections() -> Iterator[tuple[str, type[BaseModel]]]:
    """Every settings model reachable from Settings (sections, nested objects, list items), by key."""
    seen: set[type[BaseModel]] = set()

    def walk(prefix: str, model: type[BaseModel]) -> Iterator[tuple[str, type[BaseModel]]]:
        if model in seen:
            return
        seen.add(model)
        yield prefix, model
        for name, field in model.model_fields.items():
            for inner in (model_of(field.annotation), item_model_of(field.annotation)):
                if inner is not None:
                    yield from walk(f"{prefix}.{field.alias or name}", inner)

    for name, field in Settings.model_fields.items():
        model = model_of(field.annotation)
        if model is not None:
            yield from walk(name, model)


def test_the_doc_is_what_the_models_say() -> None:
    committed, generated = DOC.read_text(), render()
    if committed != generated:
        diff = difflib.unified_diff(
            committed.splitlines(), generated.splitlines(), "committed", "generated", lineterm="", n=0
        )
        pytest.fail(
            "docs/configuration.md is stale: it is generated from the settings models (their docstrings "
            f"and Field descriptions); run {REGENERATE} and commit the result.\n"
            + "\n".join(list(diff)[:30]),
            pytrace=False,
        )


def test_every_setting_has_a_description() -> None:
    top = [
        f"{n}"
        for n, f in Settings.model_fields.items()
        if model_of(f.annotation) is None and not f.description
    ]
    nested = [
        f"{key}.{field.alias or name}"
        for key, model in sections()
        for name, field in model.model_fields.items()
        if not (field.description or "").strip()
    ]
    assert top + nested == [], "settings without a description (Field(description=...)): " + ", ".join(
        top + nested
    )


def test_every_settings_model_says_what_it_is_for() -> None:
    missing = [f"{key} ({model.__name__})" for key, model in sections() if not doc_of(model)]
    assert missing == [], "settings models without a docstring: " + ", ".join(missing)


def test_every_default_is_written_as_the_yaml_that_reads_back_as_it() -> None:
    for key, model in sections():
        for name, field in model.model_fields.items():
            if field.is_required():
                continue
            default = field.get_default(call_default_factory=True)
            if isinstance(default, BaseModel):
                default = default.model_dump(mode="json", by_alias=True)
            if isinstance(default, frozenset):
                default = sorted(default)
            assert yaml.safe_load(yaml_value(default)) == default, f"{key}.{name}"
