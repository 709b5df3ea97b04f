"""Fixtures of the Slurm target's tests: one munge + MariaDB + slurmdbd for the session (started by
tests/support/slurmdbd.py), and per test a fresh cluster, an empty accounting tree and a migrated
SQLite store, and a Site (tests/slurm/site.py) tying them together with SUP's settings. Accounts and
users are global in slurmdbd, so each test starts by removing every account and user but root's."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from tests.slurm.site import Site
from tests.support.slurmdbd import SlurmdbdServer

_numbers = itertools.count(1)


@pytest.fixture
def cluster(slurmdbd: SlurmdbdServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A cluster registered for this test only, in an otherwise empty accounting database."""
    slurmdbd.reset(keep_clusters=[slurmdbd.cluster])
    name = f"t{next(_numbers)}"
    slurmdbd.sacctmgr("add", "cluster", name)
    monkeypatch.setenv("SLURM_CONF", str(slurmdbd.slurm_conf))
    return name


@pytest.fixture
def store(store_sessions: sessionmaker[Session]) -> sessionmaker[Session]:
    return store_sessions


@pytest.fixture
def slurm_settings(
    store_url: str, cluster: str, slurmdbd: SlurmdbdServer, tmp_path: Path
) -> Callable[..., Settings]:
    """Settings with the slurm target enabled on this test's cluster; keywords override slurm keys."""

    def make(reconcile: dict[str, Any] | None = None, **slurm: Any) -> Settings:
        section: dict[str, Any] = {
            "cluster": cluster,
            "sacctmgr": slurmdbd.bin["sacctmgr"],
            "lock_dir": str(tmp_path / "locks"),
            "chunk_size": 3,  # small, so that tests exercise chunking
        }
        section.update(slurm)
        return Settings(database_url=store_url, slurm=section, reconcile=reconcile or {})

    return make


@pytest.fixture
def make_site(
    slurmdbd: SlurmdbdServer,
    cluster: str,
    store: sessionmaker[Session],
    slurm_settings: Callable[..., Settings],
) -> Iterator[Callable[..., Site]]:
    """Factory: make_site(reconcile=None, **slurm_settings) -> a Site on this test's cluster."""
    sites: list[Site] = []

    def make(reconcile: dict[str, Any] | None = None, **slurm: Any) -> Site:
        site = Site(slurmdbd, cluster, slurm_settings(reconcile, **slurm), store)
        sites.append(site)
        return site

    yield make
    for site in sites:
        site.close()


@pytest.fixture
def site(make_site: Callable[..., Site]) -> Site:
    return make_site()
