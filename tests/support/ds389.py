"""A throwaway 389 Directory Server (Debian's 389-ds-base), in a temp dir, on free loopback ports.

Made by `dscreate from-file` as a "prefix install": PREFIX points lib389 at a defaults.inf of our own
(in the temp dir) whose every path (config, schema, certificates, db, logs, run, lock) lies below
the temp dir, with systemd off and root as the server's user. So
nothing is written to /etc/dirsrv, /var or /run, no instance is registered with the system (dsctl
does not list it), and removing the temp dir removes everything. dscreate creates it stopped; ns-slapd
then runs as our child in the foreground (`-d 0`), like tests/support/slapd.py's slapd.

What it holds, next to slapd.py's OpenLDAP:
- the schema: 389's own, in which 10rfc2307compat.ldif serves both of SUP's schema modes (posixGroup
  is auxiliary and allows memberUid, groupOfNames allows member), and 60sudo.ldif is sudo's schema;
  SUP's openssh-lpk in 389's LDIF format (sup/targets/ldap/schema/389ds/, checked against the
  .schema file by `schema_to_389_ldif`) is put in the instance's schema dir, as docs/ldap.md says;
- the MemberOf plugin (memberOf from `member`) and referential integrity (`member`) enabled;
- the backend `userRoot` for `dc=sup,dc=test`;
- `cn=Directory Manager` (the rootdn: no limits, no ACIs) for fixtures and assertions;
- `cn=sup,ou=services,...`: SUP's bind DN, write access by ACI, no size or look-through limit;
- `cn=limited,ou=services,...`: write access but a size limit of 5 (nsSizeLimit, nsPagedSizeLimit);
- anonymous read of everything but passwords (ACI), for sssd;
- TLS on the ldaps port and StartTLS, with a certificate for 127.0.0.1 from the test CA
  (tests/support/certs.py; `ca_file`), as slapd.py has;
- passwords stored as salted SHA-512 rather than 389's slow PBKDF2 (binds take 1 ms, not 90).

One instance serves both schema modes: `in_mode("rfc2307")` is a view of the same server whose
`ldap_settings` say so. Startup (dscreate, then ns-slapd) takes about 6 s, once per session; the stop
is a SIGKILL, since the temp dir goes next.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from ldap3 import MODIFY_REPLACE, NONE, SAFE_SYNC, Connection, Server

from tests.support.certs import write_server_tls
from tests.support.ports import free_port
from tests.support.slapd import (
    LIMITED_DN,
    LIMITED_PASSWORD,
    LIMITED_SIZE,
    SERVICE_DN,
    SERVICE_PASSWORD,
    SUFFIX,
    SUP_SCHEMAS,
    ThrowawayDirectory,
)

ROOT_DN = "cn=Directory Manager"
ROOT_PASSWORD = "root-secret-7"

SYSTEM_DEFAULTS = Path("/usr/share/dirsrv/inf/defaults.inf")
SYSTEM_SYSCONF = Path("/etc/dirsrv")  # dscreate copies schema/ and config/ from <sysconf_dir>/dirsrv
OPENSSH_LPK_389 = SUP_SCHEMAS / "389ds" / "60openssh-lpk.ldif"

# Directory Server's ACIs on the suffix: SUP's two accounts write, anybody reads (sssd binds
# anonymously), passwords are for binding only.
ACIS = (
    f'(targetattr="*")(version 3.0; acl "SUP writes"; allow (all) '
    f'(userdn="ldap:///{SERVICE_DN}" or userdn="ldap:///{LIMITED_DN}");)',
    '(targetattr!="userPassword")(version 3.0; acl "anonymous read"; '
    'allow (read, search, compare) (userdn="ldap:///anyone");)',
)


class Ds389Unavailable(RuntimeError):
    pass


def find_ns_slapd() -> tuple[str, str]:
    """(dscreate, ns-slapd), or Ds389Unavailable."""
    tools = [
        shutil.which("dscreate") or "/usr/sbin/dscreate",
        shutil.which("ns-slapd") or "/usr/sbin/ns-slapd",
    ]
    if not all(Path(t).exists() for t in tools) or not SYSTEM_DEFAULTS.exists():
        raise Ds389Unavailable("389 Directory Server is not installed; apt-get install 389-ds-base")
    return tools[0], tools[1]


# --- schema: OpenLDAP's .schema format to 389's LDIF ----------------------------------------------------


def schema_to_389_ldif(text: str, header: str = "") -> str:
    """An OpenLDAP .schema file's definitions as a 389 schema LDIF (`dn: cn=schema`, one
    `attributeTypes:`/`objectClasses:` line each, whitespace collapsed). Comments are dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    body = "\n".join(lines)
    out = [header.rstrip("\n")] if header else []
    out += [
        "dn: cn=schema",
        "objectClass: top",
        "objectClass: ldapSubentry",
        "objectClass: subschema",
        "cn: schema",
    ]
    for match in re.finditer(r"(?im)^(attributetype|objectclass)\b", body):
        start = body.index("(", match.end())
        depth, end = 0, start
        for end in range(start, len(body)):
            depth += {"(": 1, ")": -1}.get(body[end], 0)
            if depth == 0:
                break
        definition = " ".join(body[start : end + 1].split())
        name = "attributeTypes" if match.group(1).lower() == "attributetype" else "objectClasses"
        out.append(f"{name}: {definition}")
    return "\n".join(out) + "\n"


def _set_values(entry: str, values: dict[str, str]) -> str:
    """An LDIF entry with each attribute in `values` set to that one value (folded lines included)."""
    lines: list[str] = []
    dropping = False
    for line in entry.split("\n"):
        if line.startswith(" ") and dropping:
            continue
        dropping = line.split(":", 1)[0].lower() in {name.lower() for name in values}
        if not dropping:
            lines.append(line)
    return "\n".join([*lines, *(f"{name}: {value}" for name, value in values.items())])


def _ssha512(password: str) -> str:
    salt = os.urandom(16)
    digest = hashlib.sha512(password.encode() + salt).digest()
    return "{SSHA512}" + base64.b64encode(digest + salt).decode()


# --- the server -------------------------------------------------------------------------------------


class Ds389Server(ThrowawayDirectory):
    def __init__(self, schema: str = "rfc2307bis", root: Path | None = None) -> None:
        self.schema = schema
        self.dscreate, self.binary = find_ns_slapd()
        self.root = root or Path(tempfile.mkdtemp(prefix="sup-ds389-"))
        self.name = f"sup{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.tls_port = free_port()
        self.url = f"ldap://127.0.0.1:{self.port}"
        self.ldaps_url = f"ldaps://127.0.0.1:{self.tls_port}"
        self.config_dir = self.root / "etc" / "dirsrv" / f"slapd-{self.name}"
        self.ca_file = self.root / "tls" / "ca.pem"
        self.log_dir = self.root / "var" / "log" / "dirsrv" / f"slapd-{self.name}"
        self.process: subprocess.Popen[bytes] | None = None
        self._owner = True  # False for the views in_mode() hands out: they stop nothing

    def in_mode(self, schema: str) -> Ds389Server:
        """This server, for SUP's `schema` mode `schema` (389's rfc2307compat schema serves both)."""
        view = copy.copy(self)
        view.schema = schema
        view._owner = False
        return view

    # --- start and stop ----------------------------------------------------------------------------

    def _defaults_inf(self) -> str:
        """defaults.inf with every writable path below the temp dir (lib389 reads it from
        $PREFIX/share/dirsrv/inf/defaults.inf)."""
        root = str(self.root)
        moved = {
            "with_systemd": "0",
            "user": "root",
            "group": "root",
            "tmp_dir": f"{root}/tmp",
            "sysconf_dir": f"{root}/etc",
            "initconfig_dir": f"{root}/etc/default",
            "local_state_dir": f"{root}/var",
            "inst_dir": f"{root}/lib/slapd-{{instance_name}}",
            "tmpfiles_d": f"{root}/tmpfiles.d",
            "db_home_dir": f"{root}/shm/slapd-{{instance_name}}",
        }
        lines = []
        for line in SYSTEM_DEFAULTS.read_text().splitlines():
            key, sep, value = (part.strip() for part in line.partition("="))
            if sep and key in moved:
                line = f"{key} = {moved[key]}"
            elif sep and value.startswith(("/etc/dirsrv/", "/var/", "/run/")):
                line = f"{key} = {root}{value}"
            lines.append(line)
        return "\n".join(lines) + "\n"

    def _instance_inf(self) -> str:
        return f"""[general]
full_machine_name = localhost
selinux = False
systemd = False
start = False
strict_host_checking = False

[slapd]
instance_name = {self.name}
port = {self.port}
secure_port = {self.tls_port}
root_dn = {ROOT_DN}
root_password = {ROOT_PASSWORD}
self_sign_cert = False

[backend-userroot]
suffix = {SUFFIX}
create_suffix_entry = False
"""

    def start(self) -> Ds389Server:
        try:
            self._start()
        except BaseException:
            self.stop()  # no ns-slapd and no temp dir left behind by a start that failed
            raise
        return self

    def _start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "share" / "dirsrv" / "inf").mkdir(parents=True, exist_ok=True)
        (self.root / "share" / "dirsrv" / "inf" / "defaults.inf").write_text(self._defaults_inf())
        sysconf = self.root / "etc" / "dirsrv"
        for part in ("schema", "config"):
            shutil.copytree(SYSTEM_SYSCONF / part, sysconf / part, dirs_exist_ok=True)
        # The operator's step (docs/ldap.md): SUP's openssh-lpk in the instance's schema dir.
        shutil.copy(OPENSSH_LPK_389, sysconf / "schema" / OPENSSH_LPK_389.name)
        inf = self.root / "instance.inf"
        inf.write_text(self._instance_inf())
        env = {**os.environ, "PREFIX": str(self.root)}
        created = subprocess.run(
            [self.dscreate, "from-file", str(inf)], env=env, capture_output=True, text=True, timeout=180
        )
        if created.returncode != 0:
            raise Ds389Unavailable(
                f"dscreate failed ({created.returncode}): {created.stdout}{created.stderr}"
            )
        self._install_tls()
        self._configure_offline()
        self._log = (self.root / "ns-slapd.out").open("wb")
        self.process = subprocess.Popen(
            [
                self.binary,
                "-D",
                str(self.config_dir),
                "-i",
                str(self.root / "run" / "ns-slapd.pid"),
                "-d",
                "0",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()
        self._populate()

    def _install_tls(self) -> None:
        """The test CA's server certificate (tests/support/certs.py, for 127.0.0.1 and localhost)
        into the instance's NSS database as `Server-Cert` (the name 389's cn=RSA,cn=encryption
        entry uses), and the CA as trusted; nsslapd-security goes on in _configure_offline. (Quicker
        than dscreate's self-signed CA, whose 4096-bit keys took ~5 s.)"""
        tls = self.root / "tls"
        tls.mkdir()
        ca_file, cert_file, key_file = write_server_tls(tls)
        key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        bundle = tls / "server.p12"
        bundle.write_bytes(
            pkcs12.serialize_key_and_certificates(
                b"Server-Cert", key, cert, None, serialization.BestAvailableEncryption(b"p12")
            )
        )
        db, pin = f"sql:{self.config_dir}", str(self.config_dir / "pwdfile.txt")
        for command in (
            ["pk12util", "-i", str(bundle), "-d", db, "-k", pin, "-W", "p12"],
            [
                "certutil",
                "-A",
                "-d",
                db,
                "-f",
                pin,
                "-n",
                "SUP test CA",
                "-t",
                "CT,,",
                "-a",
                "-i",
                str(ca_file),
            ],
        ):
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise Ds389Unavailable(f"{command[0]} failed: {done.stdout}{done.stderr}")
        self.ca_file = ca_file

    def _configure_offline(self) -> None:
        """Edit dse.ldif before the first start: enable the MemberOf and referential integrity
        plugins (enabling a plugin online needs a restart, or nsslapd-dynamic-plugins), and store
        passwords as salted SHA-512 instead of 389's default PBKDF2, whose deliberately slow hash
        made every bind take ~90 ms (the tests bind hundreds of times; slapd's take ~1 ms)."""
        dse = self.config_dir / "dse.ldif"
        changes = {
            "dn: cn=config": {
                "nsslapd-rootpw": _ssha512(ROOT_PASSWORD),
                "nsslapd-rootpwstoragescheme": "SSHA512",
                "passwordStorageScheme": "SSHA512",
                "nsslapd-security": "on",
            },
            "dn: cn=memberof plugin,cn=plugins,cn=config": {"nsslapd-pluginEnabled": "on"},
            "dn: cn=referential integrity postoperation,cn=plugins,cn=config": {
                "nsslapd-pluginEnabled": "on"
            },
        }
        entries = dse.read_text().split("\n\n")
        for i, entry in enumerate(entries):
            first = entry.strip().split("\n", 1)[0].lower()
            if first in changes:
                entries[i] = _set_values(entry, changes.pop(first))
        if changes:
            raise Ds389Unavailable(f"dse.ldif has no {', '.join(changes)}")
        dse.write_text("\n\n".join(entries))

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise Ds389Unavailable(f"ns-slapd exited with {self.process.returncode}: {self.errors()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                return
            time.sleep(0.05)
        raise Ds389Unavailable(f"ns-slapd did not listen on {self.port}: {self.errors()}")

    def errors(self) -> str:
        """The end of the server's error log and output (its startup problems)."""
        texts = [p.read_text(errors="replace") for p in (self.log_dir / "errors", self.root / "ns-slapd.out")]
        return "\n".join(t[-3000:] for t in texts if t)

    def _populate(self) -> None:
        with self.admin() as c:
            # dscreate made the suffix entry (with ACIs of its own): ours replace them.
            _, result, _, _ = c.modify(SUFFIX, {"aci": [(MODIFY_REPLACE, list(ACIS))]})
            if result["result"] != 0:
                raise RuntimeError(f"cannot set the ACIs of {SUFFIX}: {result}")
            self._add(c, f"ou=services,{SUFFIX}", ["organizationalUnit"], {"ou": "services"})
            accounts = (
                (SERVICE_DN, SERVICE_PASSWORD, {"nsSizeLimit": "-1", "nsLookThroughLimit": "-1",
                                                "nsPagedSizeLimit": "-1"}),
                (LIMITED_DN, LIMITED_PASSWORD, {"nsSizeLimit": str(LIMITED_SIZE),
                                                "nsPagedSizeLimit": str(LIMITED_SIZE)}),
            )  # fmt: skip
            for dn, password, limits in accounts:
                cn = dn.split(",")[0].split("=")[1]
                attributes = {"cn": cn, "userPassword": password}
                self._add(c, dn, ["applicationProcess", "simpleSecurityObject"], attributes)
                _, result, _, _ = c.modify(dn, {k: [(MODIFY_REPLACE, [v])] for k, v in limits.items()})
                if result["result"] != 0:
                    raise RuntimeError(f"cannot set the limits of {dn}: {result}")

    def stop(self) -> None:
        if not self._owner:
            return
        if self.process is not None and self.process.poll() is None:
            # SIGKILL: its files go next, so a clean shutdown (~2 s: 389 waits for its database
            # threads) would buy nothing.
            self.process.kill()
            self.process.wait()
        self._stop_dscreates_server()
        if hasattr(self, "_log"):
            self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def _stop_dscreates_server(self) -> None:
        """The ns-slapd dscreate starts (as a daemon) stops before dscreate ends, but not if dscreate
        was interrupted: stop it then, by the pid in its pid file, if it runs our config dir."""
        pid_file = self.root / "run" / "dirsrv" / f"slapd-{self.name}.pid"
        with contextlib.suppress(OSError, ValueError):
            pid = int(pid_file.read_text().strip())
            if str(self.config_dir).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)

    # --- helpers for tests (the rest: ThrowawayDirectory) -------------------------------------------------

    def admin(self) -> Connection:
        """A Directory Manager connection (SAFE_SYNC: calls return (ok, result, response, request))."""
        return Connection(
            Server(self.url, get_info=NONE), ROOT_DN, ROOT_PASSWORD, client_strategy=SAFE_SYNC, auto_bind=True
        )
