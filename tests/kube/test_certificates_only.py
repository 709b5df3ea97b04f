"""`ssh_ca.plain_keys` on a real kube-apiserver: with SUP's CA on and plain keys on (the default) the
login ConfigMaps hold people's keys; with `plain_keys: false` they hold none, in a user's pod and in
a group's, while passwd, group and the CA keys stay (certificates still let people in). Switching
either way writes those ConfigMaps only (the kubelet refreshes them in the running pods: no
StatefulSet written, no restart), and the pass after it writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sup.config.ssh_ca import SshCaSettings
from tests.kube.site import Site
from tests.support.keys import ed25519_key
from tests.support.sshd import keygen

LOGIN_CONFIGS = ("login-kim", "login-saul", "group-physics")


def _login_data(site: Site) -> dict[str, dict[str, str]]:
    found = {name: site.get("login_config", name) for name in LOGIN_CONFIGS}
    return {name: dict(config["data"]) for name, config in found.items() if config is not None}


def _ca(site: Site, key_file: Path, **settings: Any) -> None:
    site.settings = site.settings.model_copy(
        update={"ssh_ca": SshCaSettings(key_file=str(key_file), **settings)}
    )


def test_certificates_only_takes_every_key_out_of_the_login_pods_and_back(
    make_site: Callable[..., Site], tmp_path: Path
) -> None:
    site = make_site(pod_security="baseline", group_pods=["physics"], home_access_mode="ReadWriteMany")
    ca = tmp_path / "ca"
    ca_line = keygen(ca, "sup-ssh-ca")
    keys = {"kim": ed25519_key("kim@laptop"), "saul": ed25519_key("saul@laptop")}
    for name, key in keys.items():
        site.add_user(name, ssh_public_keys=[key])
    site.add_group("physics", members=["kim", "saul"])
    _ca(site, ca)  # plain_keys left at its default
    site.converge()

    data = _login_data(site)
    assert set(data) == set(LOGIN_CONFIGS)
    assert data["login-kim"]["kim.keys"] == f"{keys['kim']}\n"
    assert data["group-physics"]["saul.keys"] == f"{keys['saul']}\n"
    trusted = data["login-kim"]["sup-ssh-ca.pub"]
    assert trusted.split()[:2] == ca_line.split()[:2]
    before = site.versions()

    _ca(site, ca, plain_keys=False)
    result = site.converge()  # and the pass after it writes nothing
    assert sorted((c.action, c.kind, c.name) for c in result.changes) == sorted(
        ("update", "login_config", name) for name in LOGIN_CONFIGS
    )
    after = site.versions()
    assert {key for key in after if after[key] != before.get(key)} == {
        ("login_config", name) for name in LOGIN_CONFIGS
    }  # no StatefulSet written: the pods keep running and see the new files
    for name, files in _login_data(site).items():
        assert set(files) == {"passwd", "group", "sup-ssh-ca.pub"}, name
        assert files["sup-ssh-ca.pub"] == trusted
    assert _login_data(site)["group-physics"]["passwd"] == data["group-physics"]["passwd"]

    site.update_user("kim", ssh_public_keys=[keys["kim"], ed25519_key("kim@desktop")])
    assert site.plan().changes == []  # a new key reaches no login pod

    _ca(site, ca, plain_keys=True)
    site.converge()
    back = _login_data(site)
    assert back["login-kim"]["kim.keys"].count("\n") == 2
    assert back["group-physics"]["saul.keys"] == f"{keys['saul']}\n"
