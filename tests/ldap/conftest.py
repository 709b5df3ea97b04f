"""Fixtures for the LDAP target: real slapd servers (one per schema, for the whole session), a 389
Directory Server (one, for both schemas), a fresh base DN per test, a SQLite store per test, and a
real sssd reading the test's base DN."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.targets.ldap.sssd_config import render
from tests.ldap.site import LdapServer, Site
from tests.support.ds389 import Ds389Server
from tests.support.slapd import SlapdServer
from tests.support.sssd import NEGATIVE_TIMEOUT, SSSD_TEST_OPTIONS, SssdServer, SssdUnavailable


@pytest.fixture
def slapd(slapd_rfc2307bis: SlapdServer) -> SlapdServer:
    """The default directory shape: rfc2307bis."""
    return slapd_rfc2307bis


@pytest.fixture(params=["rfc2307bis", "rfc2307"])
def any_slapd(request: pytest.FixtureRequest) -> SlapdServer:
    """Both directory shapes: the test runs once against each."""
    server: SlapdServer = request.getfixturevalue(f"slapd_{request.param}")
    return server


@pytest.fixture(params=["rfc2307bis", "rfc2307", "389-rfc2307bis", "389-rfc2307"])
def any_directory(request: pytest.FixtureRequest) -> LdapServer:
    """Both directory shapes on both servers, OpenLDAP and 389 Directory Server (whose one instance
    serves both shapes: its rfc2307compat schema allows memberUid and member)."""
    schema = str(request.param).removeprefix("389-")
    if schema != request.param:
        ds389: Ds389Server = request.getfixturevalue("ds389")
        return ds389.in_mode(schema)
    server: SlapdServer = request.getfixturevalue(f"slapd_{schema}")
    return server


@pytest.fixture(params=["slapd", "389"])
def any_server(request: pytest.FixtureRequest) -> LdapServer:
    """The default shape (rfc2307bis) on both servers: for what the server decides (result codes,
    limits, syntax checks, TLS) rather than the shape."""
    if request.param == "389":
        ds389: Ds389Server = request.getfixturevalue("ds389")
        return ds389.in_mode("rfc2307bis")
    server: SlapdServer = request.getfixturevalue("slapd_rfc2307bis")
    return server


@pytest.fixture
def make_site(store_url: str, store_sessions: sessionmaker[Session]) -> Iterator[Callable[..., Site]]:
    """Factory: make_site(slapd, **ldap_settings) -> a Site on a fresh base DN of that server."""
    sites: list[Site] = []

    def make(server: LdapServer, **ldap: Any) -> Site:
        base = server.new_base()
        settings = Settings(database_url=store_url, ldap=server.ldap_settings(base, **ldap))
        site = Site(server, base, settings, store_sessions)
        sites.append(site)
        return site

    yield make
    for site in sites:
        site.close()


@pytest.fixture
def site(make_site: Callable[..., Site], slapd: SlapdServer) -> Site:
    return make_site(slapd)


@pytest.fixture
def any_server_site(make_site: Callable[..., Site], any_server: LdapServer) -> Site:
    """A site on each server in turn (rfc2307bis)."""
    return make_site(any_server)


@pytest.fixture
def start_sssd() -> Iterator[Callable[..., SssdServer]]:
    """Factory: start_sssd(site) -> a real sssd, configured by `sup sssd-config`'s renderer."""
    started: list[SssdServer] = []

    def start(site: Site, *options: str) -> SssdServer:
        assert site.settings.ldap is not None
        config = render(site.settings.ldap, options=[*SSSD_TEST_OPTIONS, *options])
        try:
            server = SssdServer(config, negative_timeout=NEGATIVE_TIMEOUT)
        except SssdUnavailable as exc:
            pytest.skip(str(exc))
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()
