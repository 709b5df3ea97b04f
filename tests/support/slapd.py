"""A throwaway OpenLDAP server: slapd with a slapd.conf in a temp dir, on free loopback ports.

mdb database, the memberof and refint overlays, and the schemas SUP needs: core, cosine,
inetorgperson, rfc2307bis (Debian's gosa-schema) or nis (RFC 2307), and the two SUP ships in
sup/targets/ldap/schema/ (openssh-lpk and sudo). TLS is on (a CA and a server certificate from
tests/support/certs.py), on an ldaps:// port and for StartTLS on the ldap:// port.

Accounts below the suffix `dc=sup,dc=test`:
- the rootdn (no limits, bypasses ACLs) for fixtures and assertions;
- `cn=sup,ou=services,...`: SUP's bind DN, write access, no size limit;
- `cn=limited,ou=services,...`: write access but at most 5 entries per search, like an account
  whose size limit nobody raised; SUP must refuse to plan on what it reads;
- anonymous binds read everything but passwords (sssd binds anonymously).
Used by the tests (tests/ldap) and by bench/ldap_bench.py.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from ldap3 import SAFE_SYNC, Connection, Server

from tests.support.certs import write_server_tls
from tests.support.ports import free_port
from tests.support.processes import stop_process

REPO = Path(__file__).resolve().parents[2]
SUP_SCHEMAS = REPO / "sup" / "targets" / "ldap" / "schema"  # the schemas SUP ships (docs/ldap.md)
SUFFIX = "dc=sup,dc=test"
ROOT_DN = f"cn=admin,{SUFFIX}"
ROOT_PASSWORD = "root-secret-7"
SERVICE_DN = f"cn=sup,ou=services,{SUFFIX}"
SERVICE_PASSWORD = "sup-bind-secret-4"
LIMITED_DN = f"cn=limited,ou=services,{SUFFIX}"
LIMITED_PASSWORD = "limited-secret-2"
LIMITED_SIZE = 5

SCHEMA_DIRS = (Path("/etc/ldap/schema"),)
RFC2307BIS_SCHEMA = Path("/etc/ldap/schema/gosa/rfc2307bis.schema")


class SlapdUnavailable(RuntimeError):
    pass


def find_slapd() -> str:
    for candidate in (shutil.which("slapd"), "/usr/sbin/slapd"):
        if candidate and Path(candidate).exists():
            return candidate
    raise SlapdUnavailable("slapd is not installed; apt-get install slapd ldap-utils gosa-schema")


def _schema_files(schema: str) -> list[Path]:
    base = Path("/etc/ldap/schema")
    posix = RFC2307BIS_SCHEMA if schema == "rfc2307bis" else base / "nis.schema"
    files = [
        base / "core.schema",
        base / "cosine.schema",
        base / "inetorgperson.schema",
        posix,
        SUP_SCHEMAS / "openssh-lpk.schema",
        SUP_SCHEMAS / "sudo.schema",
    ]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        hint = " (apt-get install gosa-schema)" if str(RFC2307BIS_SCHEMA) in missing else ""
        raise SlapdUnavailable(f"LDAP schema files missing: {', '.join(missing)}{hint}")
    return files


class ThrowawayDirectory:
    """What the tests ask of a throwaway directory server, OpenLDAP's (below) or 389's (ds389.py):
    the same suffix and accounts, a fresh subtree per test, SUP's settings for it."""

    url: str
    schema: str

    def admin(self) -> Connection:
        """A connection that bypasses the server's limits and ACIs (SAFE_SYNC)."""
        raise NotImplementedError

    @staticmethod
    def _add(c: Connection, dn: str, classes: list[str], attributes: dict[str, Any]) -> None:
        _, result, _, _ = c.add(dn, classes, attributes)
        if result["result"] != 0:
            raise RuntimeError(f"cannot add {dn}: {result}")

    def new_base(self, prefix: str = "t") -> str:
        """A fresh, empty subtree for one test: `ou=<prefix><random>,dc=sup,dc=test`."""
        name = f"{prefix}{uuid.uuid4().hex[:10]}"
        dn = f"ou={name},{SUFFIX}"
        with self.admin() as c:
            self._add(c, dn, ["organizationalUnit"], {"ou": name})
        return dn

    def ldap_settings(self, base_dn: str, **extra: Any) -> dict[str, Any]:
        """SUP's `ldap` settings section for a base made by new_base."""
        return {
            "url": self.url,
            "bind_dn": SERVICE_DN,
            "bind_password": SERVICE_PASSWORD,
            "base_dn": base_dn,
            "schema": self.schema,
            **extra,
        }


class SlapdServer(ThrowawayDirectory):
    def __init__(self, schema: str = "rfc2307bis", root: Path | None = None) -> None:
        self.schema = schema
        self.binary = find_slapd()
        self.schema_files = _schema_files(schema)
        self.root = root or Path(tempfile.mkdtemp(prefix=f"sup-slapd-{schema}-"))
        self.port = free_port()
        self.tls_port = free_port()
        self.url = f"ldap://127.0.0.1:{self.port}"
        self.ldaps_url = f"ldaps://127.0.0.1:{self.tls_port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.root / "slapd.log"

    def _config(self) -> str:
        includes = "\n".join(f"include {f}" for f in self.schema_files)
        return f"""{includes}
pidfile {self.root}/slapd.pid
argsfile {self.root}/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
moduleload memberof
moduleload refint
TLSCACertificateFile {self.ca_file}
TLSCertificateFile {self.root}/server.pem
TLSCertificateKeyFile {self.root}/server.key

database mdb
suffix "{SUFFIX}"
rootdn "{ROOT_DN}"
rootpw {ROOT_PASSWORD}
directory {self.root}/data
maxsize 4294967296
index objectClass,uid,uidNumber,gidNumber,memberUid,member,cn eq
limits dn.exact="{SERVICE_DN}" size=unlimited time=unlimited
limits dn.exact="{LIMITED_DN}" size={LIMITED_SIZE} size.prtotal={LIMITED_SIZE}
access to attrs=userPassword by self write by anonymous auth by * none
access to * by dn.exact="{SERVICE_DN}" write by dn.exact="{LIMITED_DN}" write by * read
overlay memberof
overlay refint
refint_attributes member
"""

    def start(self) -> SlapdServer:
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        self.ca_file, _, _ = write_server_tls(self.root)
        conf = self.root / "slapd.conf"
        conf.write_text(self._config())
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [self.binary, "-d", "0", "-f", str(conf), "-h", f"{self.url}/ {self.ldaps_url}/"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()
        self._populate()
        return self

    def _wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise SlapdUnavailable(
                    f"slapd exited with {self.process.returncode}: {self.log_path.read_text()}"
                )
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                return
            time.sleep(0.05)
        raise SlapdUnavailable(f"slapd did not listen on {self.port}: {self.log_path.read_text()}")

    def _populate(self) -> None:
        with self.admin() as c:
            self._add(c, SUFFIX, ["dcObject", "organization"], {"dc": "sup", "o": "SUP tests"})
            self._add(c, f"ou=services,{SUFFIX}", ["organizationalUnit"], {"ou": "services"})
            for dn, password in ((SERVICE_DN, SERVICE_PASSWORD), (LIMITED_DN, LIMITED_PASSWORD)):
                cn = dn.split(",")[0].split("=")[1]
                attributes = {"cn": cn, "userPassword": password}
                self._add(c, dn, ["applicationProcess", "simpleSecurityObject"], attributes)

    def stop(self) -> None:
        stop_process(self.process)
        if hasattr(self, "_log"):
            self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def pause(self) -> None:
        """Freeze slapd (SIGSTOP): connections hang as they do to a server that is gone."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    # --- helpers for tests ---------------------------------------------------------------------------

    def admin(self) -> Connection:
        """A rootdn connection (SAFE_SYNC: calls return (ok, result, response, request))."""
        return Connection(Server(self.url), ROOT_DN, ROOT_PASSWORD, client_strategy=SAFE_SYNC, auto_bind=True)
