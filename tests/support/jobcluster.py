"""The job test stack: an LDAP base DN of its own in the test slapd (SUP's `ldap` settings point
there), an sssd reading it, and a real slurmctld + slurmd (tests/support/slurmctld.py) beside the
test slurmdbd in that sssd's mount namespace. `start_job_cluster` starts it in about 2 s (once slapd
and slurmdbd run); `reset()` empties it between tests; `stop()` ends it.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from sup.targets.ldap import LdapSettings
from sup.targets.ldap.sssd_config import render
from tests.support.processes import stop_process
from tests.support.slapd import SlapdServer
from tests.support.slurmctld import SlurmController
from tests.support.slurmdbd import SlurmdbdServer
from tests.support.sssd import (
    NEGATIVE_TIMEOUT,
    SSSD_COMMAND,
    SSSD_TEST_OPTIONS,
    STATE_DIRS,
    SssdServer,
    SssdUnavailable,
)


class NodeSssd(SssdServer):
    """An sssd whose mount namespace is held by a process of its own (`process`, which `run` enters),
    so that sssd can restart with an empty cache while slurmctld and slurmd stay in the namespace.

    Between tests SUP starts on an empty store and writes groups of the same names with other gids:
    `sss_cache -E` is not enough then (seen: a job got the previous test's gid of its group while
    `id` showed no such group), a cache of nothing is."""

    daemon: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30) -> NodeSssd:
        mounted = self.root / "mounted"
        script = "\n".join([*self._mounts(), f"touch {mounted}", "exec sleep infinity"])
        self.process = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while not mounted.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                stop_process(self.process)
                raise SssdUnavailable("could not set up sssd's mount namespace (unshare, mount --bind)")
            time.sleep(0.02)
        self._start_daemon(timeout)
        return self

    def _start_daemon(self, timeout: float) -> None:
        assert self.process is not None
        self._log = self.log_path.open("ab")
        self.daemon = subprocess.Popen(
            ["nsenter", "-t", str(self.process.pid), "-m", "--", *SSSD_COMMAND],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready(self.daemon, timeout)

    def restart_empty(self, timeout: float = 30) -> None:
        """Stop sssd, drop its cache and sockets, start it again."""
        stop_process(self.daemon)
        self._log.close()
        state = self.root / "state"  # bind-mounted in the namespace: empty it, keep it
        for child in state.iterdir():
            shutil.rmtree(child)
        for sub in STATE_DIRS:
            (state / sub).mkdir(parents=True)
        (self.root / "run" / "sssd.pid").unlink(missing_ok=True)
        self._start_daemon(timeout)

    def stop(self) -> None:
        stop_process(self.daemon)
        super().stop()  # the holder, the log, the temp dir


@dataclass
class JobCluster:
    """What tests that run jobs use: an LDAP base DN of their own in `slapd` (SUP writes there:
    `ldap` is the settings section), the sssd reading it, and the controller in sssd's namespace."""

    slapd: SlapdServer
    base_dn: str
    ldap: dict[str, Any]
    sssd: NodeSssd
    controller: SlurmController

    @property
    def cluster(self) -> str:
        return self.controller.cluster

    def reset(self) -> None:
        """Between tests (each starts SUP on an empty store): cancel every job, forget the users'
        ids, empty the base DN, and restart sssd with an empty cache (see NodeSssd)."""
        self.controller.cancel_all()
        self.controller.forget_users()
        self.reset_directory()
        self.sssd.restart_empty()

    def reset_directory(self) -> None:
        """Remove everything below the base DN."""
        with self.slapd.admin() as c:
            _, _, found, _ = c.search(self.base_dn, "(objectClass=*)", attributes=[])
            dns = [e["dn"] for e in found if e["dn"].lower() != self.base_dn.lower()]
            for dn in sorted(dns, key=lambda d: d.count(","), reverse=True):
                c.delete(dn)

    def stop(self) -> None:
        self.controller.stop()
        self.sssd.stop()


def start_job_cluster(slapd: SlapdServer, slurmdbd: SlurmdbdServer) -> JobCluster:
    """An LDAP base for SUP, an sssd reading it, slurmctld + slurmd beside `slurmdbd` in sssd's
    namespace. Raises SlurmctldUnavailable (or SssdUnavailable) when this machine cannot run it."""
    base_dn = slapd.new_base("jobs")
    ldap = slapd.ldap_settings(base_dn, timeout_seconds=3)
    sssd = NodeSssd(
        render(LdapSettings.model_validate(ldap), options=list(SSSD_TEST_OPTIONS)),
        negative_timeout=NEGATIVE_TIMEOUT,
    ).start()
    try:
        controller = SlurmController(slurmdbd, sssd).start()
    except BaseException:
        sssd.stop()
        raise
    return JobCluster(slapd, base_dn, ldap, sssd, controller)
