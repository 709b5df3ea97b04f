"""The schema files SUP ships load the way docs/ldap.md tells operators to load them: the LDIFs with
`ldapadd -Y EXTERNAL -H ldapi:///` into a running cn=config slapd, after which entries can use them.
(The .schema files are what every other LDAP test's slapd.conf includes; the 389 Directory Server
LDIF is what the 389 test server puts in its schema dir.)"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from ldap3 import SAFE_SYNC, Connection, Server

from tests.support.ds389 import OPENSSH_LPK_389, schema_to_389_ldif
from tests.support.ports import free_port
from tests.support.slapd import SUP_SCHEMAS, SlapdServer, SlapdUnavailable, find_slapd

SUFFIX = "dc=lpk,dc=test"
ROOT_DN = f"cn=admin,{SUFFIX}"


def _config_ldif(root: Path) -> str:
    schemas = "\n".join(
        f"include: file:///etc/ldap/schema/{name}.ldif" for name in ("core", "cosine", "inetorgperson", "nis")
    )
    return f"""dn: cn=config
objectClass: olcGlobal
cn: config
olcPidFile: {root}/slapd.pid

dn: cn=module{{0}},cn=config
objectClass: olcModuleList
cn: module{{0}}
olcModulePath: /usr/lib/ldap
olcModuleLoad: back_mdb

dn: cn=schema,cn=config
objectClass: olcSchemaConfig
cn: schema

{schemas}

dn: olcDatabase={{-1}}frontend,cn=config
objectClass: olcDatabaseConfig
objectClass: olcFrontendConfig
olcDatabase: {{-1}}frontend

dn: olcDatabase={{0}}config,cn=config
objectClass: olcDatabaseConfig
olcDatabase: {{0}}config
olcAccess: {{0}}to * by dn.exact=gidNumber=0+uidNumber=0,cn=peercred,cn=external,cn=auth manage by * break

dn: olcDatabase={{1}}mdb,cn=config
objectClass: olcDatabaseConfig
objectClass: olcMdbConfig
olcDatabase: {{1}}mdb
olcSuffix: {SUFFIX}
olcRootDN: {ROOT_DN}
olcRootPW: secret
olcDbDirectory: {root}/data
"""


@pytest.fixture
def cn_config_slapd(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A slapd configured through cn=config, like Debian's: (ldapi URL, ldap URL)."""
    try:
        slapd = find_slapd()
    except SlapdUnavailable as exc:
        pytest.skip(str(exc))
    if shutil.which("ldapadd") is None:
        pytest.skip("ldapadd is not installed; apt-get install ldap-utils")
    (tmp_path / "config").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "config.ldif").write_text(_config_ldif(tmp_path))
    subprocess.run(
        ["slapadd", "-n0", "-F", str(tmp_path / "config"), "-l", str(tmp_path / "config.ldif")],
        check=True,
        capture_output=True,
    )
    ldapi = "ldapi://" + urllib.parse.quote(str(tmp_path / "ldapi"), safe="")
    ldap = f"ldap://127.0.0.1:{free_port()}"
    process = subprocess.Popen(
        [slapd, "-d", "0", "-F", str(tmp_path / "config"), "-h", f"{ldapi} {ldap}/"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Ready when the ldapi socket accepts a connection (the file appears a moment before that).
        for _ in range(400):
            if process.poll() is not None:
                pytest.fail(f"slapd (cn=config) exited with {process.returncode}")
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as probe:
                probe.connect(str(tmp_path / "ldapi"))
                break
            time.sleep(0.05)
        else:
            pytest.fail("slapd (cn=config) did not accept connections on its ldapi socket")
        yield ldapi, ldap
    finally:
        process.terminate()
        process.wait(timeout=15)


def _ldapadd(ldapi: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ldapadd", "-Q", "-Y", "EXTERNAL", "-H", ldapi, "-f", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_shipped_ldifs_load_into_cn_config_and_entries_can_use_them(
    cn_config_slapd: tuple[str, str],
) -> None:
    ldapi, ldap = cn_config_slapd
    for name in ("openssh-lpk.ldif", "sudo.ldif"):
        loaded = _ldapadd(ldapi, SUP_SCHEMAS / name)
        assert loaded.returncode == 0, f"{name}: {loaded.stderr}"

    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C7okWi0dh2l9GKJl kim@laptop"
    with Connection(Server(ldap), ROOT_DN, "secret", client_strategy=SAFE_SYNC, auto_bind=True) as c:
        assert c.add(SUFFIX, ["dcObject", "organization"], {"dc": "lpk", "o": "lpk"})[0]
        user = {"uid": "kim", "cn": "Kim", "sn": "W", "uidNumber": 10000, "gidNumber": 10000,
                "homeDirectory": "/home/kim", "sshPublicKey": key}  # fmt: skip
        ok, result, _, _ = c.add(
            f"uid=kim,{SUFFIX}", ["inetOrgPerson", "posixAccount", "ldapPublicKey"], user
        )
        assert ok, result
        rule = {
            "cn": "ops",
            "sudoUser": "%ops",
            "sudoHost": "ALL",
            "sudoCommand": "ALL",
            "sudoOption": "!authenticate",
        }
        ok, result, _, _ = c.add(f"cn=ops,{SUFFIX}", ["sudoRole"], rule)
        assert ok, result
        _, _, found, _ = c.search(
            f"uid=kim,{SUFFIX}", "(sshPublicKey=*)", "BASE", attributes=["sshPublicKey"]
        )
    assert found[0]["raw_attributes"]["sshPublicKey"] == [key.encode()]


def test_the_shipped_schema_files_are_what_the_test_servers_include(slapd: SlapdServer) -> None:
    assert SUP_SCHEMAS / "openssh-lpk.schema" in slapd.schema_files
    assert SUP_SCHEMAS / "sudo.schema" in slapd.schema_files


def test_the_389_ldif_holds_the_definitions_of_the_schema_file() -> None:
    """sup/targets/ldap/schema/389ds/60openssh-lpk.ldif is openssh-lpk.schema in 389's format (the
    389 test server loads it, so every 389 test that writes a user proves it loads)."""
    shipped = OPENSSH_LPK_389.read_text()
    header = "".join(line + "\n" for line in shipped.splitlines() if line.startswith("#"))
    assert shipped == schema_to_389_ldif((SUP_SCHEMAS / "openssh-lpk.schema").read_text(), header)
    assert "attributeTypes: ( 1.3.6.1.4.1.24552.500.1.1.1.13 NAME 'sshPublicKey'" in shipped
