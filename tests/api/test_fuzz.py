"""Schemathesis against SUP's own OpenAPI schema (issue 10): every operation, generated valid and
invalid input (schemathesis' positive and negative modes), with real tokens (admin for the admin
API, a SCIM connection's for /scim/v2), in process over ASGI on a fresh SQLite store. The only check
is the one that matters for abuse: no answer is a 5xx. Bounded by `MAX_EXAMPLES` per operation and
mode so that the run stays well under a minute."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from sup.app import create_app
from sup.config import Settings
from sup.domain.roles import Role
from sup.store.session import make_engine, make_sessionmaker
from sup.tokens.service import create_token
from tests.conftest import ACTOR

MAX_EXAMPLES = 25
UNLIMITED = {"requests_per_second": 100000, "burst": 100000}


@pytest.fixture
def fuzzed_app(tmp_path: Path, sqlite_template: Path) -> Iterator[dict[str, Any]]:
    path = tmp_path / "sup.db"
    shutil.copy(sqlite_template, path)
    config = Settings(
        database_url=f"sqlite:///{path}", api={"rate_limit": UNLIMITED}, scim={"rate_limit": UNLIMITED}
    )
    engine = make_engine(config.database_url)
    with make_sessionmaker(engine).begin() as session:
        _, admin = create_token(session, ACTOR, "fuzz-admin", Role.admin)
        _, scim = create_token(session, ACTOR, "fuzz-scim", Role.scim)
    app = create_app(config, engine)
    yield {"app": app, "admin": admin, "scim": scim}
    engine.dispose()


def _fuzz(strategy: Any, headers: dict[str, str], seen: Counter[int], failures: list[str]) -> None:
    """Send `MAX_EXAMPLES` cases drawn from `strategy`; count the status classes, note every 5xx."""

    @given(case=strategy)
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,  # the same inputs every run: a failure here reproduces
        database=None,
    )
    def run(case: Any) -> None:
        response = case.call(headers=headers)
        seen[response.status_code // 100] += 1
        if response.status_code >= 500:
            failures.append(f"{response.status_code} {case.as_curl_command()}: {response.text[:300]}")

    run()


def test_no_input_makes_sup_answer_5xx(fuzzed_app: dict[str, Any]) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzzed_app["app"])
    failures: list[str] = []
    seen: Counter[int] = Counter()
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]  # Err: a broken schema fails here
        operations += 1
        token = fuzzed_app["scim"] if operation.path.startswith("/scim/v2") else fuzzed_app["admin"]
        for mode in GenerationMode:
            try:
                _fuzz(operation.as_strategy(generation_mode=mode), {"Authorization": f"Bearer {token}"},
                      seen, failures)  # fmt: skip
            except Unsatisfiable:  # negative mode on an operation that takes no input: nothing to break
                assert mode is GenerationMode.NEGATIVE, operation.label
    assert operations >= 40, operations  # the whole schema was walked
    assert not failures, "\n".join(failures[:10])
    assert seen[2] > 100 and seen[4] > 100, seen  # the tokens worked, and bad input was refused
