"""How docs/configuration.md says a setting's type, bounds and default (sup/config/describe.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from sup.config.describe import bounds_text, default_text, type_text, yaml_value
from sup.domain.ids import IdRange


class Sample(BaseModel):
    port: int = Field(22, ge=1, le=65535)
    share: float = Field(0.5, gt=0, le=1)
    fairshare: int | Literal["parent"] | None = None
    mode: Literal["lock", "delete"] = "lock"
    names: frozenset[str] = frozenset({"b", "a"})
    roles: dict[str, Literal["admin", "viewer"]] = Field(default_factory=dict)
    ranges: list[IdRange] = Field(default_factory=list)
    secret: SecretStr
    manager: str = Field("sup", min_length=1, max_length=120, pattern=r"^[a-z]+$")


def test_types_are_said_plainly() -> None:
    fields = Sample.model_fields
    assert type_text(fields["port"]) == "int (1 to 65535)"
    assert type_text(fields["share"]) == "number (above 0, at most 1)"
    assert type_text(fields["fairshare"]) == "int, `parent` or null"
    assert type_text(fields["mode"]) == "one of `lock`, `delete`"
    assert type_text(fields["names"]) == "list of str"
    assert type_text(fields["roles"]) == "map of str to one of `admin`, `viewer`"
    assert type_text(fields["ranges"]) == "list of object"
    assert type_text(fields["secret"]) == "secret str"
    assert bounds_text(fields["manager"]) == "not empty, at most 120 long, matching `^[a-z]+$`"


def test_defaults_are_the_yaml_one_would_write() -> None:
    fields = Sample.model_fields
    assert default_text(fields["secret"]) == "required"
    assert default_text(fields["names"]) == "`[a, b]`"
    assert default_text(fields["fairshare"]) == "`null`"
    assert yaml_value(["fd00:ec2::254/128", "!authenticate", "4", "", "/bin/bash"]) == (
        '[fd00:ec2::254/128, "!authenticate", "4", "", /bin/bash]'
    )
    assert yaml_value("sqlite:///sup.db") == "sqlite:///sup.db"
    assert yaml_value({"requests_per_second": 20.0, "burst": 200}) == "{requests_per_second: 20, burst: 200}"
