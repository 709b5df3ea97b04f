"""Id numbers that every Linux system reserves, and ranges of ids (the settings `ids` use them; the
store allocates within them)."""

from __future__ import annotations

from pydantic import Field, model_validator

from sup.common.sections import Section

# Numbers that mean something to every Linux system and must never name a person or a group.
FORBIDDEN_IDS: frozenset[int] = frozenset({0, 65534, 65535, 4294967294, 4294967295})
MAX_ID = 4294967293


class IdRange(Section):
    """An inclusive range of uid or gid numbers, `min`-`max`."""

    min: int = Field(ge=1, le=MAX_ID, description="the range's first number")
    max: int = Field(ge=1, le=MAX_ID, description="the range's last number (inclusive); not below min")

    @model_validator(mode="after")
    def _ordered(self) -> IdRange:
        if self.min > self.max:
            raise ValueError(f"range {self.min}-{self.max} is empty (min > max)")
        return self

    def __contains__(self, number: object) -> bool:
        return isinstance(number, int) and self.min <= number <= self.max

    def __str__(self) -> str:
        return f"{self.min}-{self.max}"
