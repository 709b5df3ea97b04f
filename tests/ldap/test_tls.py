"""TLS to the directory: StartTLS on ldap://, ldaps://, and a server certificate that does not verify."""

from __future__ import annotations

from collections.abc import Callable

from tests.ldap.site import LdapServer, Site
from tests.support.slapd import SlapdServer


def test_start_tls_with_the_site_ca(make_site: Callable[..., Site], any_server: LdapServer) -> None:
    site = make_site(any_server, start_tls=True, ca_file=str(any_server.ca_file))
    site.add_user("kim")
    site.converge()
    assert site.entry(site.user_dn("kim")) is not None


def test_ldaps_with_the_site_ca(make_site: Callable[..., Site], any_server: LdapServer) -> None:
    site = make_site(any_server, url=any_server.ldaps_url, ca_file=str(any_server.ca_file))
    site.add_user("kim")
    site.converge()
    assert site.entry(site.user_dn("kim")) is not None


def test_an_unverifiable_certificate_stops_the_pass(
    make_site: Callable[..., Site], slapd: SlapdServer
) -> None:
    choices: list[dict[str, object]] = [{"start_tls": True}, {"url": slapd.ldaps_url}]
    for i, tls in enumerate(choices):  # the system's CAs do not know the test CA
        site = make_site(slapd, **tls)
        if i == 0:
            site.add_user("kim")  # the sites share one store
        result = site.reconcile()
        error = result.targets[0].error or ""
        assert result.targets[0].state == "error", error
        assert "certificate verify failed" in error or "CERTIFICATE_VERIFY_FAILED" in error, error
        assert site.dns(site.base_dn) == {site.base_dn.lower()}  # nothing written
