"""Shared fixtures: real databases (a SQLite file and a real PostgreSQL server), the app, tokens.

`database_url` runs a test once on SQLite and once on PostgreSQL. Each test gets a fresh database
copied from a migrated template, so tests are independent and fast.

With SUP_TEST_NO_SKIP=1 (set by scripts/test, and so by CI) a skipped test fails the run: a test
that needs a real server and did not run has not passed.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from sup.app import create_app
from sup.config import Settings
from sup.domain.roles import Role
from sup.store import migrate
from sup.store.audit import Actor
from sup.store.session import make_engine, make_sessionmaker
from sup.tokens.service import create_token
from tests.support.postgres import PostgresServer, PostgresUnavailable

# The real servers (slapd, slurmdbd, kube-apiserver), shared by every test directory.
pytest_plugins = ["tests.support.servers"]

# --- skipped tests fail the run where everything must run ------------------------------------------

_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("SUP_TEST_NO_SKIP") == "1" and _skipped:
        print(f"\nSUP_TEST_NO_SKIP=1 and {len(_skipped)} test(s) were skipped:")
        for nodeid in _skipped[:50]:
            print(f"  {nodeid}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `kube_teardown` stop the session's real Kubernetes cluster to check what its
    teardown leaves behind: they run after every other test (which may still need that cluster)."""
    last = [item for item in items if item.get_closest_marker("kube_teardown")]
    if last:
        items[:] = [item for item in items if not item.get_closest_marker("kube_teardown")] + last


TEST_RUN_VARIABLES = frozenset({"SUP_TEST_NO_SKIP", "SUP_CACHE_DIR"})


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests build their settings explicitly; the developer's SUP_* variables must not leak in. The
    test run's own (not SUP's settings) stay: SUP_TEST_NO_SKIP, and SUP_CACHE_DIR, which the build
    scripts the tests run read (a test that runs scripts/build-images must find the same cache as
    the session's build did)."""
    for name in list(os.environ):
        if name.startswith("SUP_") and name not in TEST_RUN_VARIABLES:
            monkeypatch.delenv(name)


# --- databases -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    try:
        server = PostgresServer()
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_template(postgres: PostgresServer) -> str:
    url = postgres.create_database("sup_template")
    migrate.upgrade(url)
    return "sup_template"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "sup.db"
    migrate.upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def store_url(tmp_path: Path, sqlite_template: Path) -> str:
    """A migrated, empty SQLite store, for target tests (a target never sees which database is behind
    the store; the store itself is tested on both)."""
    path = tmp_path / "sup.db"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def store_sessions(store_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(store_url)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def new_postgres_database(postgres: PostgresServer) -> Iterator[Callable[[bool], str]]:
    """Factory: a fresh PostgreSQL database, migrated (from the template) or empty."""
    created: list[str] = []

    def make(migrated: bool = True) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        created.append(name)
        template = None
        if migrated:
            template = "sup_template"
        return postgres.create_database(name, template)

    yield make
    for name in created:
        postgres.drop_database(name)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty database: a SQLite file, or a database on the real PostgreSQL server."""
    if request.param == "sqlite":
        path = tmp_path / "sup.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    request.getfixturevalue("postgres_template")
    factory: Callable[[bool], str] = request.getfixturevalue("new_postgres_database")
    return factory(True)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url)


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    engine = make_engine(settings.database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    return make_sessionmaker(engine)


ACTOR = Actor(name="test", role="admin")


# --- the app ---------------------------------------------------------------------------------------


@pytest.fixture
def client(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    with TestClient(create_app(settings, engine), raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def tokens(sessions: sessionmaker[Session]) -> dict[str, str]:
    """One live token per role: {"admin": "sup_...", ...}."""
    secrets: dict[str, str] = {}
    with sessions.begin() as session:
        for role in Role:
            _, secrets[role.value] = create_token(session, ACTOR, f"{role.value}-token", role)
    return secrets


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def admin(tokens: dict[str, str]) -> dict[str, str]:
    return bearer(tokens["admin"])


@pytest.fixture
def operator(tokens: dict[str, str]) -> dict[str, str]:
    return bearer(tokens["operator"])


@pytest.fixture
def viewer(tokens: dict[str, str]) -> dict[str, str]:
    return bearer(tokens["viewer"])
