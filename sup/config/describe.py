"""How one setting reads in docs/configuration.md: its type said plainly, its bounds, its default as
YAML. Used by the reference generator (sup/config/reference.py); pure functions of a pydantic field.
"""

from __future__ import annotations

import json
import types
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
import yaml
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

_SCALARS: dict[type, str] = {bool: "bool", int: "int", float: "number", str: "str", SecretStr: "secret str"}


def model_of(annotation: Any) -> type[BaseModel] | None:
    """The settings model a field holds (itself or optional), None for anything else."""
    members = _union_members(annotation)
    models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
    return models[0] if len(models) == 1 and len(members) - len(models) <= 1 else None


def item_model_of(annotation: Any) -> type[BaseModel] | None:
    """The model of a list's items (`supplied_uid_ranges: list[IdRange]`), None for anything else."""
    if get_origin(annotation) in (list, tuple, set, frozenset):
        args = get_args(annotation)
        if args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
            return args[0]
    return None


def mapped_model_of(annotation: Any) -> type[BaseModel] | None:
    """The model of a map's values (`scim.oauth: dict[str, ScimOAuthConnection]`), None for anything else."""
    if get_origin(annotation) is dict:
        args = get_args(annotation)
        if len(args) == 2 and isinstance(args[1], type) and issubclass(args[1], BaseModel):
            return args[1]
    return None


def is_optional(annotation: Any) -> bool:
    return type(None) in _union_members(annotation)


def is_secret(annotation: Any) -> bool:
    """A SecretStr, never printed (`ldap.bind_password`)."""
    return SecretStr in _union_members(annotation)


def type_text(field: FieldInfo) -> str:
    """`int (1 to 65535)`, `list of str`, `one of `lock`, `delete``, `str or null`, ..."""
    text = _type_name(field.annotation)
    bounds = bounds_text(field)
    return f"{text} ({bounds})" if bounds else text


def bounds_text(field: FieldInfo) -> str:
    """The field's declared bounds in words: `1 to 65535`, `above 0, at most 60`, `not empty`, ..."""
    low = high = ""
    words: list[str] = []
    for item in field.metadata:
        if isinstance(item, annotated_types.Ge):
            low = f"at least {item.ge}"
        elif isinstance(item, annotated_types.Gt):
            low = f"above {item.gt}"
        elif isinstance(item, annotated_types.Le):
            high = f"at most {item.le}"
        elif isinstance(item, annotated_types.Lt):
            high = f"below {item.lt}"
        elif isinstance(item, annotated_types.MinLen):
            words.append("not empty" if item.min_length == 1 else f"at least {item.min_length} long")
        elif isinstance(item, annotated_types.MaxLen):
            words.append(f"at most {item.max_length} long")
        elif getattr(item, "pattern", None):
            words.append(f"matching `{item.pattern}`")
    if low.startswith("at least") and high.startswith("at most"):
        bounds = [f"{low.removeprefix('at least ')} to {high.removeprefix('at most ')}"]
    else:
        bounds = [b for b in (low, high) if b]
    return ", ".join(bounds + words)


def default_text(field: FieldInfo, value: Any = None, *, inherited: bool = False) -> str:
    """The default as YAML, `required` when there is none. `inherited`: `value` is the default, taken
    from the enclosing section's default (api.rate_limit's burst is not RateLimit's own)."""
    if inherited:
        return f"`{yaml_value(_plain(value))}`"
    if field.is_required():
        return "required"
    default = field.get_default(call_default_factory=True)
    return f"`{yaml_value(_plain(default))}`"


def yaml_value(value: Any, *, flow: bool = False) -> str:
    """`value` as one line of YAML (flow style): what one would write in the settings file. `flow`:
    it stands inside a flow collection, where `,`, `[`, `{` and `: ` mean something too."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return repr(int(value))  # 20.0 reads as 20 in the file; the model takes it as a float again
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _yaml_string(value, flow=flow)
    if isinstance(value, Mapping):
        pairs = (f"{_yaml_string(str(k), flow=True)}: {yaml_value(v, flow=True)}" for k, v in value.items())
        return "{" + ", ".join(pairs) + "}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(yaml_value(v, flow=True) for v in value) + "]"
    raise TypeError(f"no YAML form for {value!r}")


def _yaml_string(text: str, *, flow: bool) -> str:
    """The string bare when YAML reads it back as this string where it stands, else a JSON string
    (which YAML reads too): `/bin/bash`, but `"4"`, `"-"`, `"!authenticate"`, `""`."""
    if text and text == text.strip():
        try:
            loaded = yaml.safe_load(f"[{text}]" if flow else text)
        except yaml.YAMLError:
            loaded = None
        if loaded == ([text] if flow else text):
            return text
    return json.dumps(text)


def _plain(value: Any) -> Any:
    """Models as the mappings one writes (aliases as keys), sets as sorted lists."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, frozenset | set):
        return sorted(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _union_members(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def _type_name(annotation: Any) -> str:
    parts: list[str] = []
    nullable = False
    for member in _union_members(annotation):
        if member is type(None):
            nullable = True
        elif get_origin(member) is Literal:
            parts.extend(f"`{yaml_value(v)}`" for v in get_args(member))
        else:
            parts.append(_single_type_name(member))
    if nullable:
        parts.append("null")
    if len(parts) == 1:
        return parts[0]
    if not nullable and all(p.startswith("`") for p in parts):
        return "one of " + ", ".join(parts)
    return ", ".join(parts[:-1]) + " or " + parts[-1]


def _single_type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return f"list of {_type_name(get_args(annotation)[0])}"
    if origin is dict:
        key, value = get_args(annotation)
        return f"map of {_type_name(key)} to {_type_name(value)}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    raise TypeError(f"no plain name for the settings type {annotation!r}")
