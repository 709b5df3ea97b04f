"""Fixtures of the store and planner tests."""

from __future__ import annotations

import pytest

from sup.config import Settings
from tests.support.fake_target import FakeSettings


@pytest.fixture
def configured(database_url: str) -> Settings:
    """SUP's settings with the fake target enabled, on the test database."""
    return FakeSettings(database_url=database_url, fake={})
