"""docs/configuration.md, rendered from the settings models: the models are the one place a setting is
described (its type, bounds, default and description), as traitlets' help text is for kubespawner.

Each section of `Settings` becomes a heading with its model's docstring and a table of its keys
(nested objects as dotted keys); the targets' sections come from the registry through `Settings`, so
a new target's settings are documented by its own package. `scripts/gen-config-docs` writes the
file, and tests/docs/test_configuration_doc.py fails when the committed file differs from this.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from sup.config.describe import (
    default_text,
    is_optional,
    is_secret,
    item_model_of,
    mapped_model_of,
    model_of,
    type_text,
    yaml_value,
)
from sup.config.settings import Settings, SettingsBase

REGENERATE = "scripts/gen-config-docs"
WIDTH = 100

INTRO = """\
# Configuration

<!-- Generated from the settings models (sup/config, sup/targets/*/settings.py) by scripts/gen-config-docs;
do not edit by hand: change a model's docstring or a field's description and run it again. -->

SUP reads `SUP_*` environment variables and, if `SUP_CONFIG` names a YAML file, that file. Keys nest:
`ids.uid_range.min` in YAML is `SUP_IDS__UID_RANGE__MIN` in the environment (the section, then each
key, upper case, joined by two underscores). The environment wins over the file. Unknown keys in the
file are an error (a typo must not silently fall back to a default). A list or map key is JSON in
the environment: `SUP_LDAP__ADMIN_GROUPS='["hpc-admins"]'`, `SUP_KUBE__NODE_SELECTOR='{"pool":
"login"}'`.
"""

READING = """\
Each table lists a section's keys with their type (and the bounds SUP checks), their default as it
would be written in the settings file, and what they mean; an object's own keys follow it as dotted
keys (`rate_limit.burst` is `api.rate_limit.burst`), and `[]` stands for each item of a list.
"""


def header(settings: type[SettingsBase]) -> str:
    """The hand-written introduction, with the lists that come from the models filled in."""
    targets = [spec.name for spec in settings.target_specs]
    sections = {name: field for name, field in settings.model_fields.items() if model_of(field.annotation)}
    optional = [
        name for name, field in sections.items() if is_optional(field.annotation) and name not in targets
    ]
    secrets = [
        f"{name}.{key_of(key, inner)}"
        for name, field in sections.items()
        for key, inner in _model(field).model_fields.items()
        if is_secret(inner.annotation)
    ]
    secrets_line = f"Secrets ({_words(secrets)}) are never printed, also not in error messages."
    optional_line = (
        f"A section marked *optional* is absent by default, and absent means off: {_words(optional)}, "
        f"and the targets' {_words(targets)} (one per target of sup/targets/registry.py). A section that "
        "is present must be complete: its keys marked *required* have no default. Every other section "
        "is always read, and each of its keys has a default."
    )
    return "\n".join([INTRO, _fill(secrets_line), "", _fill(optional_line), "", READING])


def _fill(text: str) -> str:
    """A generated paragraph, wrapped as the hand-written ones are."""
    return textwrap.fill(text, width=WIDTH, break_long_words=False, break_on_hyphens=False)


def _words(names: list[str]) -> str:
    quoted = [f"`{name}`" for name in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _model(field: FieldInfo) -> type[BaseModel]:
    model = model_of(field.annotation)
    if model is None:
        raise TypeError(f"{field!r} holds no settings model")
    return model


def render(settings: type[SettingsBase] = Settings) -> str:
    """docs/configuration.md for `settings`: the header, then the top-level keys, then one part per
    section, in the order the settings declare them (the targets' last, in the registry's order)."""
    targets = {spec.name for spec in settings.target_specs}
    top = {name: field for name, field in settings.model_fields.items() if model_of(field.annotation) is None}
    parts = [header(settings)]
    if top:
        parts.append("## Top level\n\n" + _table(_rows(top, prefix="")))
    for name, field in settings.model_fields.items():
        model = model_of(field.annotation)
        if model is not None:
            parts.append(_section(name, field, model, target=name in targets))
    return "\n".join(parts)


def _section(name: str, field: FieldInfo, model: type[BaseModel], *, target: bool) -> str:
    where = f"`{model.__name__}` in {model.__module__.replace('.', '/')}.py"
    if target:
        where += f": the `{name}` target's own section, composed into the settings from its registry entry"
    env = f"`SUP_{name.upper()}__<KEY>`"
    if is_optional(field.annotation):
        status = f"*Optional*: absent by default (off). Environment: {env}. Model: {where}."
    else:
        status = f"Always read. Environment: {env}. Model: {where}."
    rows = _table(_rows(model.model_fields, prefix="", defaults=_default(field)))
    return f"## `{name}`\n\n{doc_of(model)}\n\n{_fill(status)}\n\n{rows}"


def doc_of(model: type[BaseModel]) -> str:
    """The model's own docstring, dedented; empty when it has none (the test refuses that)."""
    own = model.__dict__.get("__doc__")
    return inspect.cleandoc(own) if isinstance(own, str) else ""


def key_of(name: str, field: FieldInfo) -> str:
    """The key as written in the settings file (an alias when the model has one: ldap's `schema`)."""
    return field.alias or name


def _rows(fields: dict[str, FieldInfo], prefix: str, defaults: Any = None) -> Iterator[tuple[str, ...]]:
    """One row per key, then the rows of an object's keys (defaults taken from the object's default
    when it has one: api.rate_limit's are not RateLimit's own)."""
    for name, field in fields.items():
        key = prefix + key_of(name, field)
        inherited = isinstance(defaults, BaseModel)
        value = getattr(defaults, name) if inherited else None
        yield (
            f"`{key}`",
            type_text(field),
            default_text(field, value, inherited=inherited),
            _describe(field),
        )
        nested = model_of(field.annotation)
        if nested is not None:
            yield from _rows(nested.model_fields, f"{key}.", value if inherited else _default(field))
        items = item_model_of(field.annotation)
        if items is not None:
            yield from _rows(items.model_fields, f"{key}[].")
        mapped = mapped_model_of(field.annotation)
        if mapped is not None:
            yield from _rows(mapped.model_fields, f"{key}.NAME.")


def _default(field: FieldInfo) -> Any:
    return None if field.is_required() else field.get_default(call_default_factory=True)


def _describe(field: FieldInfo) -> str:
    text = field.description or ""
    for example in field.examples or ():
        text += f"; e.g. `{yaml_value(example)}`"
    return text


def _table(rows: Iterator[tuple[str, ...]]) -> str:
    lines = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Print the reference (`python -m sup.config.reference > docs/configuration.md`)."""
    print(render(), end="")


if __name__ == "__main__":
    main()
