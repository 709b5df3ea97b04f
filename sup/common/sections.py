"""The base of every settings section (sup/config and each target's settings model)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A settings section: unknown keys are an error, not silently ignored (a typo must not disable
    what it meant to configure)."""

    model_config = ConfigDict(extra="forbid")
