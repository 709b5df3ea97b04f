"""Logging in with the identity provider, on the real test node: `sup ssh login` (the one-file
client) signs the person in with the real Keycloak's device flow, SUP signs their new key, and
`ssh cluster` is a shell in their login pod through the gateway, with no key ever uploaded. The
site takes certificates only (`ssh_ca.plain_keys: false`): an uploaded key opens neither the
gateway nor a pod. Disabled in Keycloak, the person is refused at the gateway at once and their
pod goes with the next pass."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import GatewaySite
from tests.e2e.login_site import SSH_FAILED, Person, Through, new_person
from tests.support.keycloak import KeycloakServer, Realm
from tests.support.ssh_login_client import sign_in
from tests.support.sshd import keygen

POD_BOUND = 90  # seconds: the pass after the suspension reaches SUP, and the pod's termination


@pytest.fixture
def realm(keycloak: KeycloakServer) -> Iterator[Realm]:
    realm = keycloak.new_realm()
    yield realm
    keycloak.admin().delete_realm(realm.name)


def test_sup_ssh_login_then_ssh_cluster_lands_in_the_pod_and_a_disabled_person_is_refused(
    make_gateway_site: Callable[..., GatewaySite], realm: Realm, tmp_path: Path
) -> None:
    realm.add_device_client("sup-ssh")
    kim_id = realm.add_user("kim", password="pw-kim")
    ca_key = tmp_path / "ssh_ca"
    keygen(ca_key, "sup-ca")
    site, gateway = make_gateway_site(
        idle_seconds=3600,
        gateway={"route_cache_seconds": 0.5},
        settings={
            "keycloak": {**realm.settings(), "interval_seconds": 0},  # one pull at start; then by hand
            "oidc": {"issuer": realm.issuer, "audience": "sup", "allow_insecure_http": True},
            "ssh_ca": {"key_file": str(ca_key), "login_client_id": "sup-ssh", "plain_keys": False},
        },
    )
    site.stack.sup("sync", "keycloak")  # kim, as the pull at start does (whichever comes first)
    site.wait_ready("login-kim")

    # On her laptop: one command, a browser approval, and `ssh cluster` works.
    home = tmp_path / "kim-home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    signed = sign_in(site.server.url if site.server else "", realm, home, "kim", "pw-kim")
    assert signed.done.returncode == 0, signed.done.stdout + signed.done.stderr
    assert "signed in as kim" in signed.done.stdout
    signed.add_defaults()
    landed = signed.ssh('echo "$(id -un) $(hostname) $HOME"')
    assert landed.returncode == 0, landed.stderr
    assert landed.stdout.split() == ["kim", "login-kim-0", "/home/kim"]
    about_kim = site.call("GET", "audit?resource_name=kim&limit=500").json()["items"]
    signing = [e for e in about_kim if e["action"] == "sign_certificate"]
    gateway_logins = site.call("GET", "audit?resource_type=gateway&action=login&limit=500").json()["items"]
    logins = [e for e in gateway_logins if e["resource_name"] in ("kim", "user/kim")]
    assert logins and logins[0]["after"]["fingerprint"].startswith("cert:SHA256:")
    assert [e["actor"] for e in signing] == ["self:kim"]

    # Plain keys are off: pat's uploaded key opens neither the gateway nor her own pod.
    pat = new_person(site.directory, "pat")
    site.add(pat)
    site.wait_ready("login-pat")
    through = Through(tmp_path, pat, gateway.port).ssh("pat", "id")
    assert through.returncode == SSH_FAILED and "Permission denied" in through.stderr, through.stderr
    direct = site.ssh(pat, "login-pat", "id")
    assert direct.returncode == SSH_FAILED and "Permission denied" in direct.stderr, direct.stderr

    # Her certificate works straight at her pod too (its sshd trusts SUP's CA, not the gateway).
    kim = Person("kim", signed.key)
    assert site.ssh_ok(kim, "login-kim", "id -un") == "kim\n"

    # Disabled in Keycloak: refused at the gateway at once, and at her pod once it is gone.
    realm.admin.update_user(kim_id, {"enabled": False})
    site.stack.sup("sync", "keycloak")
    time.sleep(1)  # the gateway's route cache (0.5 s)
    refused = signed.ssh("id")
    assert refused.returncode == SSH_FAILED and "Permission denied" in refused.stderr, refused.stderr
    started = time.monotonic()
    site.reconcile("kube")
    while True:
        try:
            attempt = site.ssh(kim, "login-kim", "id", timeout=20)
        except AssertionError:  # the pod's name has no address: it is gone
            break
        if attempt.returncode != 0:
            break
        assert time.monotonic() - started < POD_BOUND, "her certificate still opens her pod"
        time.sleep(1)
