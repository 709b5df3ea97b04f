"""A real sssd reading a test slapd, without touching the machine's own NSS or sssd.

sssd has fixed paths (/etc/sssd, /var/lib/sss for its cache and sockets, /run/sssd.pid). Here it runs
in a private mount namespace (`unshare -m`, private propagation) in which those paths, and
/etc/nsswitch.conf, are bind mounts of directories in a temp dir. Queries (`getent`, `id`,
`sss_ssh_authorizedkeys`, `sudo -l -U`, `sss_cache`) run in the same namespace through
`nsenter -t PID -m`, so they see this sssd and nsswitch.conf's `passwd: files sss`, and nothing
outside does: the host's own sssd (if any) and its users are not disturbed, and several of these
can run at once. Needs root (mount namespaces) and the sssd, libnss-sss and libsss-sudo packages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.processes import stop_process

NSSWITCH = """passwd: files sss
group: files sss
shadow: files
sudoers: files sss
hosts: files
"""
# Cache directories sssd expects below /var/lib/sss (Debian's layout).
STATE_DIRS = (
    "db",
    "mc",
    "pipes/private",
    "pubconf/krb5.include.d",
    "gpo_cache",
    "secrets",
    "deskprofile",
    "keytabs",
)


# sssd normally caches entries for 90 minutes and "no such user" for 15 s; the tests look right
# after each write (options for `sup sssd-config`'s renderer).
NEGATIVE_TIMEOUT = 1
SSSD_TEST_OPTIONS = (
    "entry_cache_timeout=1",
    "nss:memcache_timeout=0",
    f"nss:entry_negative_timeout={NEGATIVE_TIMEOUT}",
    "ldap_network_timeout=5",
)


SSSD_COMMAND = ("sssd", "-i", "-d", "2", "--logger=stderr", "-c", "/etc/sssd/sssd.conf")


class SssdUnavailable(RuntimeError):
    pass


def check_available() -> None:
    if os.geteuid() != 0:
        raise SssdUnavailable("running sssd in a private mount namespace needs root")
    missing = [
        tool
        for tool in ("sssd", "sss_cache", "sss_ssh_authorizedkeys", "unshare", "nsenter", "getent", "sudo")
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists()
    ]
    libs = [
        lib
        for lib in ("libnss_sss.so.2", "libsss_sudo.so")
        if not [*Path("/usr/lib").glob(lib), *Path("/usr/lib").glob(f"*/{lib}")]
    ]
    if missing or libs:
        raise SssdUnavailable(
            f"missing {', '.join(missing + libs)}; "
            "apt-get install sssd-ldap sssd-tools libnss-sss libsss-sudo sudo"
        )


class SssdServer:
    def __init__(self, config: str, root: Path | None = None, *, negative_timeout: float = 15) -> None:
        check_available()
        self.negative_timeout = negative_timeout  # the config's [nss] entry_negative_timeout
        self.root = root or Path(tempfile.mkdtemp(prefix="sup-sssd-"))
        self.config = config
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.root / "sssd.log"

    def start(self, timeout: float = 30) -> SssdServer:
        script = "\n".join([*self._mounts(), f"exec {' '.join(SSSD_COMMAND)}"])
        self._log = self.log_path.open("wb")
        # unshare execs sh, which execs sssd: self.process.pid is sssd's monitor, in the namespace.
        self.process = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready(self.process, timeout)
        return self

    def _mounts(self) -> list[str]:
        """Write sssd's files in the temp dir; the shell lines that bind-mount them over sssd's fixed
        paths (and nsswitch.conf) in a new mount namespace."""
        etc = self.root / "etc-sssd"
        (etc / "conf.d").mkdir(parents=True, exist_ok=True)
        conf = etc / "sssd.conf"
        conf.write_text(self.config)
        conf.chmod(0o600)
        state = self.root / "state"
        for sub in STATE_DIRS:
            (state / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "run").mkdir(exist_ok=True)
        (self.root / "nsswitch.conf").write_text(NSSWITCH)
        return [
            "set -e",
            f"mount --bind {etc} /etc/sssd",
            f"mount --bind {state} /var/lib/sss",
            f"mount --bind {self.root / 'run'} /run",
            f"mount --bind {self.root / 'nsswitch.conf'} /etc/nsswitch.conf",
        ]

    def _wait_ready(self, sssd: subprocess.Popen[bytes], timeout: float) -> None:
        """Wait until the `sssd` process serves its nss, sudo and ssh responders."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sssd.poll() is not None:
                raise SssdUnavailable(f"sssd exited with {sssd.returncode}: {self.log()}")
            ready = self.run(
                "sh",
                "-c",
                " && ".join(f"test -S /var/lib/sss/pipes/{p}" for p in ("nss", "sudo", "ssh")),
                check=False,
            )
            if ready.returncode == 0:
                return
            time.sleep(0.1)
        raise SssdUnavailable(f"sssd did not start in {timeout}s: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def run(
        self, *command: str, check: bool = False, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run `command` inside sssd's mount namespace."""
        assert self.process is not None
        return subprocess.run(
            ["nsenter", "-t", str(self.process.pid), "-m", "--", *command],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
        )

    def clear_cache(self) -> None:
        """Forget everything sssd cached: the next lookup asks LDAP. `sss_cache -E` expires entries
        and sudo rules; "no such user" answers stay in the responder's negative cache until
        entry_negative_timeout lapses (counted in whole seconds), so wait that out too."""
        self.run("sss_cache", "-E", check=True)
        time.sleep(self.negative_timeout + 1.1)

    # --- what a node sees ----------------------------------------------------------------------------

    def getent(self, database: str, key: str) -> str | None:
        result = self.run("getent", database, key)
        return result.stdout.strip() if result.returncode == 0 else None

    def id(self, user: str) -> str | None:
        result = self.run("id", user)
        return result.stdout.strip() if result.returncode == 0 else None

    def authorized_keys(self, user: str) -> list[str]:
        result = self.run("sss_ssh_authorizedkeys", user)
        return [line for line in result.stdout.splitlines() if line.strip()]

    def sudo_rules(self, user: str) -> str:
        """What `sudo -l -U USER` prints (sudo's rules through sssd's sudo responder)."""
        result = self.run("sudo", "-n", "-l", "-U", user)
        return result.stdout + result.stderr

    def stop(self) -> None:
        stop_process(self.process)
        if hasattr(self, "_log"):
            self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)
