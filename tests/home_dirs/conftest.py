from __future__ import annotations

import os

import pytest


@pytest.fixture
def as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("the maker chowns: run as root (scripts/test does)")
