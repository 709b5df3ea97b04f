"""`sup plan`, `sup reconcile` and `sup sssd-config` as an operator runs them, against a real slapd
(and, for sssd-config, a real sssd reading the file it wrote)."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path

import yaml
from ldap3 import MODIFY_ADD, MODIFY_DELETE, MODIFY_REPLACE

from tests.ldap.site import Site
from tests.support.cli import run_sup
from tests.support.slapd import SERVICE_DN, SERVICE_PASSWORD, SlapdServer
from tests.support.sssd import SSSD_TEST_OPTIONS, SssdServer


def test_plan_shows_hand_made_drift_and_reconcile_repairs_it(site: Site) -> None:
    site.add_user("kim")
    site.add_user("saul")
    site.add_group("physics", members=["kim"])
    site.add_group("empty")
    env = site.env()
    first = run_sup("reconcile", env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "ldap: applied" in first.stdout

    with site.admin() as c:
        assert c.modify(site.user_dn("kim"), {"loginShell": [(MODIFY_REPLACE, ["/bin/sh"])]})[0]
        assert c.modify(site.group_dn("physics"), {"member": [(MODIFY_ADD, [site.user_dn("saul")])]})[0]
        assert c.modify(site.group_dn("physics"), {"member": [(MODIFY_DELETE, [site.user_dn("kim")])]})[0]
        assert c.delete(site.group_dn("empty"))[0]
        intruder = {"uid": "intruder", "cn": "i", "sn": "i", "uidNumber": 4242, "gidNumber": 4242,
                    "homeDirectory": "/root"}  # fmt: skip
        assert c.add(f"uid=intruder,{site.users_dn}", ["inetOrgPerson", "posixAccount"], intruder)[0]

    plan = run_sup("plan", env={**env, "COLUMNS": "400"})  # no wrapping in the table
    assert plan.returncode == 0, plan.stderr
    text = plan.stdout
    assert "ldap: planned, 5 change(s)" in text
    assert "loginShell: /bin/sh -> /bin/bash" in text
    assert "intruder" in text and "empty" in text and "physics" in text
    as_json = json.loads(run_sup("plan", "--json", env=env).stdout)
    assert sorted((c["action"], c["kind"], c["name"], c["subject"]) for c in as_json) == [
        ("add_members", "group", "physics", "kim"),
        ("create", "group", "empty", None),
        ("delete", "user", "intruder", "intruder"),
        ("remove_members", "group", "physics", "saul"),
        ("update", "user", "kim", "kim"),
    ]
    assert SERVICE_PASSWORD not in plan.stdout + plan.stderr

    repaired = run_sup("reconcile", env=env)
    assert repaired.returncode == 0 and "5 applied, 0 failed" in repaired.stdout
    again = run_sup("plan", env=env)
    assert "No changes." in again.stdout
    kim = site.entry(site.user_dn("kim"))
    assert kim is not None and kim["loginShell"] == ["/bin/bash"]
    assert site.entry(f"uid=intruder,{site.users_dn}") is None


def test_reconcile_exits_8_and_names_the_user_on_a_collision(site: Site) -> None:
    with site.admin() as c:
        assert c.add(f"ou=staff,{site.base_dn}", ["organizationalUnit"], {"ou": "staff"})[0]
        legacy = {
            "uid": "legacy",
            "cn": "l",
            "sn": "l",
            "uidNumber": 10000,
            "gidNumber": 100,
            "homeDirectory": "/",
        }
        assert c.add(f"uid=legacy,ou=staff,{site.base_dn}", ["inetOrgPerson", "posixAccount"], legacy)[0]
    site.add_user("kim")
    result = run_sup("reconcile", env={**site.env(), "COLUMNS": "400"})
    assert result.returncode == 8
    assert "failed: ldap report kim: uidNumber 10000 is already used by uid=legacy,ou=staff," in result.stdout
    # for scripts: the same exit code, and the failure with the change it was for; YAML = JSON
    as_json = run_sup("reconcile", "-o", "json", env=site.env())
    as_yaml = run_sup("reconcile", "-o", "yaml", env=site.env())
    assert as_json.returncode == as_yaml.returncode == 8
    report = json.loads(as_json.stdout)
    assert yaml.safe_load(as_yaml.stdout) == report
    ldap = next(t for t in report["targets"] if t["target"] == "ldap")
    assert [(f["change"]["kind"], f["change"]["name"]) for f in ldap["failed"]] == [("user", "kim")]
    assert "uidNumber 10000 is already used" in ldap["failed"][0]["error"]


def test_sssd_config_matches_the_settings(
    make_site: Callable[..., Site], slapd: SlapdServer, tmp_path: Path
) -> None:
    site = make_site(slapd, schema="rfc2307", start_tls=True, ca_file=str(slapd.ca_file))
    out = run_sup("sssd-config", "--domain", "cluster", "--option", "debug_level=3", env=site.env())
    assert out.returncode == 0, out.stderr
    lines = set(out.stdout.splitlines())
    assert {
        "domains = cluster",
        "[domain/cluster]",
        f"ldap_uri = {slapd.url}",
        "ldap_schema = rfc2307",
        f"ldap_search_base = {site.base_dn}",
        f"ldap_user_search_base = {site.users_dn}",
        f"ldap_group_search_base = {site.groups_dn}",
        f"ldap_sudo_search_base = {site.sudoers_dn}",
        "ldap_group_member = memberUid",
        "ldap_id_use_start_tls = true",
        f"ldap_tls_cacert = {slapd.ca_file}",
        "services = nss, pam, ssh, sudo",
        "debug_level = 3",
    } <= lines
    assert SERVICE_PASSWORD not in out.stdout and SERVICE_DN not in out.stdout

    refused = run_sup("sssd-config", "--bind-dn", SERVICE_DN, env=site.env())
    assert refused.returncode == 5 and "read-only" in refused.stderr
    template = tmp_path / "custom.conf"
    template.write_text("[sssd]\ndomains = $domain\n[domain/$domain]\nldap_uri = $url\n")
    bad = run_sup("sssd-config", "--template", str(template), env=site.env())
    assert bad.returncode == 5 and "$url" in bad.stderr and "$uri" in bad.stderr
    assert run_sup("sssd-config", "--option", "no equals sign", env=site.env()).returncode == 5


def test_sssd_runs_on_the_file_sssd_config_writes(site: Site, tmp_path: Path) -> None:
    site.add_user("kim")
    site.converge()
    path = tmp_path / "sssd.conf"
    options = [arg for option in SSSD_TEST_OPTIONS for arg in ("--option", option)]
    written = run_sup("sssd-config", "--output", str(path), *options, env=site.env())
    assert written.returncode == 0, written.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    sssd = SssdServer(path.read_text())
    try:
        sssd.start()
        assert sssd.getent("passwd", "kim") == "kim:*:10000:10000:kim:/home/kim:/bin/bash"
    finally:
        sssd.stop()
