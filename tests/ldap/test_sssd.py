"""What a login node sees, through a real sssd configured by `sup sssd-config`'s renderer: accounts,
groups, SSH keys and sudo rules after a pass, the lock after a deactivation, and drift repaired."""

from __future__ import annotations

from collections.abc import Callable

from ldap3 import MODIFY_DELETE, MODIFY_REPLACE

from tests.ldap.site import LdapServer, Site
from tests.support.keys import ed25519_key
from tests.support.sssd import SssdServer


def _group_line(sssd: SssdServer, name: str) -> tuple[str, set[str]]:
    """`getent group NAME` as (the part before the members, the set of members)."""
    line = sssd.getent("group", name)
    assert line is not None, f"sssd does not know group {name}: {sssd.log()}"
    head, _, members = line.rpartition(":")
    return head, set(filter(None, members.split(",")))


def test_nodes_see_accounts_groups_keys_and_sudo_and_then_the_lock(
    make_site: Callable[..., Site], any_directory: LdapServer, start_sssd: Callable[..., SssdServer]
) -> None:
    site = make_site(any_directory, admin_groups=["ops"])
    key = ed25519_key("kim@laptop")
    site.add_user("kim", display_name="Kim Wéxler", ssh_public_keys=[key])
    site.add_user("saul", login_shell="/bin/zsh")
    site.add_group("physics", members=["kim", "saul"])
    site.add_group("ops", members=["kim"])
    site.add_group("empty")
    site.converge()
    sssd = start_sssd(site)

    assert sssd.getent("passwd", "kim") == "kim:*:10000:10000:Kim Wexler:/home/kim:/bin/bash"
    assert sssd.getent("passwd", "saul") == "saul:*:10001:10001:saul:/home/saul:/bin/zsh"
    assert _group_line(sssd, "physics") == ("physics:*:50000", {"kim", "saul"})
    assert _group_line(sssd, "empty") == ("empty:*:50002", set())
    assert _group_line(sssd, "kim") == ("kim:*:10000", set())
    kim_id = sssd.id("kim")
    assert kim_id is not None and kim_id.startswith("uid=10000(kim) gid=10000(kim) groups=")
    assert set(kim_id.split("groups=")[1].split(",")) == {"10000(kim)", "50000(physics)", "50001(ops)"}
    assert sssd.authorized_keys("kim") == [key]
    assert sssd.authorized_keys("saul") == []
    assert "(ALL) NOPASSWD: ALL" in sssd.sudo_rules("kim")
    assert "is not allowed to run sudo" in sssd.sudo_rules("saul")

    site.update_user("kim", active=False)
    site.converge()
    sssd.clear_cache()
    assert sssd.getent("passwd", "kim") == "kim:*:10000:10000:Kim Wexler:/home/kim:/usr/sbin/nologin"
    assert sssd.authorized_keys("kim") == []
    assert sssd.id("kim") == "uid=10000(kim) gid=10000(kim) groups=10000(kim)"
    assert _group_line(sssd, "physics") == ("physics:*:50000", {"saul"})
    assert "is not allowed to run sudo" in sssd.sudo_rules("kim")


def test_drift_shows_on_nodes_until_a_pass_repairs_it(
    site: Site, start_sssd: Callable[..., SssdServer]
) -> None:
    site.add_user("kim", ssh_public_keys=[ed25519_key()])
    site.add_user("saul")
    site.add_group("physics", members=["kim", "saul"])
    site.converge()
    sssd = start_sssd(site)
    assert _group_line(sssd, "physics")[1] == {"kim", "saul"}

    with site.admin() as c:
        assert c.modify(site.user_dn("kim"), {"loginShell": [(MODIFY_REPLACE, ["/bin/sh"])]})[0]
        assert c.modify(site.user_dn("kim"), {"sshPublicKey": [(MODIFY_REPLACE, [ed25519_key("rogue")])]})[0]
        assert c.modify(site.group_dn("physics"), {"member": [(MODIFY_DELETE, [site.user_dn("saul")])]})[0]
        assert c.delete(site.user_dn("saul"))[0]
    sssd.clear_cache()
    kim = sssd.getent("passwd", "kim")
    assert kim is not None and kim.endswith(":/bin/sh")
    assert sssd.authorized_keys("kim")[0].endswith("rogue")
    assert sssd.getent("passwd", "saul") is None

    site.converge()
    sssd.clear_cache()
    kim = sssd.getent("passwd", "kim")
    assert kim is not None and kim.endswith(":/bin/bash")
    assert len(sssd.authorized_keys("kim")) == 1 and not sssd.authorized_keys("kim")[0].endswith("rogue")
    assert sssd.getent("passwd", "saul") == "saul:*:10001:10001:saul:/home/saul:/bin/bash"
    assert _group_line(sssd, "physics")[1] == {"kim", "saul"}
