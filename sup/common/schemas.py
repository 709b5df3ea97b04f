"""Base classes for request and response bodies."""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

T = TypeVar("T")


class Body(BaseModel):
    """A request body: unknown fields are refused (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class PatchBody(Body):
    """A partial update. Only the fields present are changed; `null` clears an optional field and
    is refused for a field that cannot be empty (listed in `required_fields`)."""

    required_fields: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*")
    @classmethod
    def _no_null_for_required(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None and info.field_name in cls.required_fields:
            raise ValueError("cannot be null")
        return value

    def provided(self) -> dict[str, Any]:
        """The fields the caller actually sent, with their (validated) values."""
        return {name: getattr(self, name) for name in self.model_fields_set}


class Page(BaseModel, Generic[T]):
    """One page of a list: `items`, and `total` matching items across all pages."""

    items: list[T]
    total: int
    limit: int
    offset: int
