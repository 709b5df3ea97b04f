"""A real Slurm controller and compute node (slurmctld + slurmd, Debian's 22.05) beside the test
slurmdbd, resolving users through SUP's directory, so that a person SUP provisions can run jobs.

`SlurmController` runs both daemons inside the private mount namespace of an sssd (tests/support/
sssd.py), where /etc/nsswitch.conf says `passwd: files sss`: a user SUP writes into LDAP is known to
slurmctld (which checks the submitter's uid against its associations and resolves their groups) and
to slurmd (which starts the job as that uid) within sssd's cache timeouts. It shares the slurmdbd
fixture's munged (same key, same socket) and cluster name, and slurmdbd's SlurmUser (a controller
whose SlurmUser differs is refused slurmdbd's association updates, so new users cannot run jobs).
Accounting is enforced (`associations,limits`), so a user without an association is refused, and a
removed or blocked association refuses the next job within the time slurmdbd takes to tell slurmctld.

Both daemons listen on every address (0.0.0.0) on free ports, so that a client elsewhere (a login
pod, reaching the host through its bridge) can use them: `client_conf(address)` renders the
slurm.conf such a client needs, and `munge_key` is the key its munged needs. Jobs here run as the user
through `setpriv` inside the namespace (`run_as`, `srun`, `sbatch`, `squeue`).

`JobCluster` is the whole piece the tests use: an LDAP base DN of its own in the test slapd, an sssd
reading it, and the controller; `start_job_cluster` starts it (about 2 s once slapd and slurmdbd
run), `reset()` empties it between tests, `stop()` ends it.
Needs root, the sssd fixture's packages, slurmctld and slurmd.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sup.targets.ldap import LdapSettings
from sup.targets.ldap.sssd_config import render
from tests.support.ports import free_port
from tests.support.processes import stop_process
from tests.support.slapd import SlapdServer
from tests.support.slurmdbd import SlurmdbdServer
from tests.support.sssd import (
    NEGATIVE_TIMEOUT,
    SSSD_COMMAND,
    SSSD_TEST_OPTIONS,
    STATE_DIRS,
    SssdServer,
    SssdUnavailable,
)

REQUIRED = ("slurmctld", "slurmd", "srun", "sbatch", "squeue", "sinfo", "scontrol", "setpriv", "nsenter")
NODE = "supnode"
PARTITION = "debug"
MUNGE_SOCKET = "/run/munge/munge.socket.2"  # munge's default: what a client elsewhere uses
SRUN_PORTS = 20  # srun listens on a few ports per step (its I/O and message ports)
PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


class SlurmctldUnavailable(RuntimeError):
    pass


def _which(name: str) -> str:
    for candidate in (shutil.which(name), f"/usr/sbin/{name}", f"/usr/bin/{name}"):
        if candidate and Path(candidate).is_file():
            return candidate
    raise SlurmctldUnavailable(
        f"{name} is not installed; apt-get install slurmctld slurmd slurm-client util-linux "
        "(or run scripts/setup --servers as root)"
    )


def _free_port_range(count: int) -> tuple[int, int]:
    """`count` consecutive ports that nothing listens on now (for SrunPortRange)."""
    for _ in range(200):
        first = random.randrange(40000, 60000 - count)
        with contextlib.ExitStack() as held:
            try:
                for port in range(first, first + count):
                    s = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    s.bind(("0.0.0.0", port))  # srun binds every address
            except OSError:
                continue
        return first, first + count - 1
    raise SlurmctldUnavailable(f"no {count} consecutive free ports for SrunPortRange")


@dataclass(frozen=True)
class Job:
    """A finished `srun`/`sbatch`/`squeue` run: exit code, what it printed, how long it took."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@dataclass(frozen=True)
class FirstJob:
    """A person's first job (`SlurmController.first_job`), timed from the call: when their
    association was in slurmdbd, when the job had run (`seconds`), and how many sruns it took."""

    job: Job
    association_seconds: float
    seconds: float
    attempts: int


class SlurmController:
    """slurmctld + one slurmd (node `supnode`) in `sssd`'s mount namespace, in one default partition
    (`debug`, or `partition`: e.g. the one a sample account's associations are limited to)."""

    def __init__(self, slurmdbd: SlurmdbdServer, sssd: SssdServer, partition: str = PARTITION) -> None:
        if os.geteuid() != 0:
            raise SlurmctldUnavailable("slurmctld and slurmd run in sssd's mount namespace: needs root")
        self.bin = {name: _which(name) for name in REQUIRED}
        self.slurmdbd = slurmdbd
        self.sssd = sssd
        self.cluster = slurmdbd.cluster
        self.partition = partition
        self.root = Path(tempfile.mkdtemp(prefix="sup-slurmctld-"))
        self.root.chmod(0o755)
        self.conf = self.root / "slurm.conf"
        self.jobs_dir = self.root / "jobs"  # the jobs' working directory, writable by everyone
        self.ctld_port = free_port()
        self.slurmd_port = free_port()
        self.srun_ports = _free_port_range(SRUN_PORTS)
        self.cpus = os.cpu_count() or 1
        self.slurm_user = slurmdbd.slurm or pwd.getpwuid(os.geteuid())
        self._processes: list[subprocess.Popen[bytes]] = []
        self._identities: dict[str, tuple[str, str, str]] = {}  # user -> (uid, gid, home), once seen

    # --- configuration ---------------------------------------------------------------------------

    def _common(self) -> list[str]:
        """What every slurm.conf of this cluster says, the controller's and its clients'."""
        return [
            f"ClusterName={self.cluster}",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.slurmd_port}",
            f"SrunPortRange={self.srun_ports[0]}-{self.srun_ports[1]}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"SlurmUser={self.slurm_user.pw_name}",
            "SlurmdUser=root",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "ReturnToService=2",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "AccountingStorageEnforce=associations,limits",
        ]

    def _server_conf(self) -> str:
        d = self.root
        lines = [
            "SlurmctldHost=localhost(127.0.0.1)",  # slurmctld accepts "localhost" as its own name
            *self._common(),
            f"AuthInfo=socket={self.slurmdbd.munge_socket}",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={d / 'spool'}",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}",
            f"SlurmdPidFile={d / 'slurmd.pid'}",
            f"SlurmctldLogFile={d / 'slurmctld.log'}",
            f"SlurmdLogFile={d / 'slurmd.log'}",
            f"PlugStackConfig={d / 'plugstack.conf'}",  # not the machine's /etc/slurm/plugstack.conf
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={self.slurmdbd.dbd_port}",
            f"AccountingStoragePass={self.slurmdbd.munge_socket}",  # the munge socket, for slurmdbd
            f"NodeName={NODE} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN",
            f"PartitionName={self.partition} Nodes={NODE} Default=YES State=UP MaxTime=10",
        ]
        return "\n".join(lines) + "\n"

    def client_conf(self, controller_address: str, *, controller_name: str = "sup-slurmctld") -> str:
        """The slurm.conf of a client on another host or pod that reaches this controller and its
        node at `controller_address` (e.g. the host's address on the pod bridge). It talks to the
        munged at munge's default socket (/run/munge/munge.socket.2) holding `munge_key`. Clients
        need no accounting lines: slurmctld checks the associations. Its `SlurmUser=slurm` must
        resolve there (Debian's slurm-client brings the user, uid 64030 as here).

        The client must reach `ports["slurmctld"]` and `ports["slurmd"]` at the address, and this
        host must reach the client's `ports["srun"]` range (slurmd connects back to srun): a
        NetworkPolicy around a login pod has to allow both. Jobs run on this host, so their
        working directory is a path here: from a directory this host lacks (a pod's $HOME) srun
        warns and runs in /tmp, and an sbatch job FAILS unless it is given `-D`/`-o` paths that
        exist here (`jobs_dir` is writable by everyone)."""
        lines = [
            f"SlurmctldHost={controller_name}({controller_address})",
            *self._common(),
            f"NodeName={NODE} NodeAddr={controller_address} CPUs={self.cpus} State=UNKNOWN",
            f"PartitionName={self.partition} Nodes={NODE} Default=YES State=UP MaxTime=10",
        ]
        return "\n".join(lines) + "\n"

    @property
    def ports(self) -> dict[str, tuple[int, int]]:
        """The TCP ports clients use, as (first, last) ranges: slurmctld, slurmd, srun."""
        return {
            "slurmctld": (self.ctld_port, self.ctld_port),
            "slurmd": (self.slurmd_port, self.slurmd_port),
            "srun": self.srun_ports,
        }

    def write_client_conf(self, controller_address: str) -> Path:
        """client_conf(controller_address) in a file every user can read (for `run_as(conf=...)`)."""
        directory = self.root / "clients" / controller_address
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        (self.root / "clients").chmod(0o755)
        conf = directory / "slurm.conf"
        conf.write_text(self.client_conf(controller_address))
        conf.chmod(0o644)
        return conf

    @property
    def munge_key(self) -> bytes:
        """The munge key (the slurmdbd fixture's): what a client's munged needs, e.g. in a Secret."""
        return (self.slurmdbd.munge_dir / "munge.key").read_bytes()

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self, timeout: float = 60) -> SlurmController:
        try:
            self._prepare()
            self._spawn("slurmctld", [self.bin["slurmctld"], "-D", "-f", str(self.conf)])
            self._wait(lambda: self._slurm("scontrol", "ping").returncode == 0, "slurmctld answers", timeout)
            self._spawn("slurmd", [self.bin["slurmd"], "-D", "-f", str(self.conf), "-N", NODE])
            self._wait(self._node_idle, "slurmd registered, node idle", timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _prepare(self) -> None:
        uid, gid = self.slurm_user.pw_uid, self.slurm_user.pw_gid
        for sub in ("state", "spool"):
            (self.root / sub).mkdir(mode=0o755)
        os.chown(self.root / "state", uid, gid)
        self.jobs_dir.mkdir()
        self.jobs_dir.chmod(0o1777)
        (self.root / "plugstack.conf").write_text("")
        self.conf.write_text(self._server_conf())
        # Inside the namespace /run is sssd's own directory: munge's default socket there leads to
        # the slurmdbd fixture's munged, so a client slurm.conf (default socket) works here too.
        link = self.sssd.root / Path(MUNGE_SOCKET).relative_to("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(self.slurmdbd.munge_socket)

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        assert self.sssd.process is not None
        with (self.root / f"{name}.out").open("ab") as out:
            # nsenter execs the daemon: the Popen's pid is the daemon's.
            process = subprocess.Popen(
                [*self._nsenter(self.root), *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(self.conf),
                cwd=self.root,
            )
        self._processes.append(process)

    def _wait(self, ready: Callable[[], bool], what: str, timeout: float) -> None:
        """Poll `ready` until it is true (`what`: what it means), or fail with the daemons' logs."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self._processes):
                break
            if ready():
                return
            time.sleep(0.2)
        raise SlurmctldUnavailable(f"not reached within {timeout} s: {what}\n{self.logs()}")

    def _node_idle(self) -> bool:
        state = self._slurm("sinfo", "-h", "-N", "-o", "%t").stdout.strip()
        return state == "idle"

    def logs(self) -> str:
        parts = []
        for name in ("slurmctld.log", "slurmctld.out", "slurmd.log", "slurmd.out"):
            path = self.root / name
            if path.exists():
                parts.append(f"--- {name}:\n{path.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts) or "(no logs)"

    def stop(self) -> None:
        for process in reversed(self._processes):
            stop_process(process, timeout=20)
        self._processes.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    # --- running things in the namespace ---------------------------------------------------------

    def _nsenter(self, directory: Path) -> list[str]:
        """The command prefix that runs a program in sssd's mount namespace, in `directory` (entering
        a mount namespace otherwise leaves a process in its root directory)."""
        assert self.sssd.process is not None
        return [self.bin["nsenter"], "-t", str(self.sssd.process.pid), "-m", f"--wd={directory}", "--"]

    def _env(self, conf: Path, **extra: str) -> dict[str, str]:
        return {"PATH": PATH, "LANG": "C.UTF-8", "SLURM_CONF": str(conf), **extra}

    def _slurm(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """A Slurm command as root inside the namespace."""
        assert self.sssd.process is not None
        return subprocess.run(
            [*self._nsenter(self.root), *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=self._env(self.conf),
        )

    def run_as(self, user: str, *argv: str, conf: Path | None = None, timeout: float = 120) -> Job:
        """Run `argv` as `user` (their uid, primary gid and groups, as NSS in the namespace has them:
        SUP's directory), in the jobs directory, with a clean environment and this cluster's
        slurm.conf (or `conf`: e.g. a client_conf written to a file). The user's ids are read
        through NSS the first time and kept: a user SUP has since retired still runs as that uid."""
        uid, gid, home = self._identity(user)
        assert self.sssd.process is not None
        started = time.monotonic()
        done = subprocess.run(
            [
                *self._nsenter(self.jobs_dir),
                self.bin["setpriv"],
                f"--reuid={uid}",
                f"--regid={gid}",
                "--init-groups",
                "--",
                *argv,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=self.jobs_dir,
            env=self._env(conf or self.conf, USER=user, LOGNAME=user, HOME=home),
        )
        return Job(done.returncode, done.stdout, done.stderr, time.monotonic() - started)

    def _identity(self, user: str) -> tuple[str, str, str]:
        if user not in self._identities:
            entry = self.sssd.getent("passwd", user)
            if entry is None:
                raise LookupError(f"{user} is not known in the namespace (getent passwd)")
            _, _, uid, gid, _, home, _ = entry.split(":")
            self._identities[user] = (uid, gid, home)
        return self._identities[user]

    def forget_users(self) -> None:
        self._identities.clear()

    def srun(self, user: str, *args: str, timeout: float = 120) -> Job:
        return self.run_as(user, self.bin["srun"], *args, timeout=timeout)

    def sbatch(self, user: str, *args: str) -> Job:
        return self.run_as(user, self.bin["sbatch"], "--parsable", *args, timeout=60)

    def squeue(self, user: str, *args: str) -> Job:
        return self.run_as(user, self.bin["squeue"], *args, timeout=60)

    def job_state(self, job_id: str) -> str:
        """The job's state as slurmctld has it (PENDING, RUNNING, COMPLETED, FAILED...)."""
        shown = self._slurm("scontrol", "-o", "show", "job", job_id).stdout
        match = re.search(r"\bJobState=(\S+)", shown)
        return match.group(1) if match else "UNKNOWN"

    def wait_job(self, job_id: str, timeout: float = 60) -> str:
        """Wait until the job has ended; its final state."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.job_state(job_id)
            if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "UNKNOWN"):
                return state
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} still {self.job_state(job_id)} after {timeout} s")

    def first_job(self, user: str, account: str, timeout: float = 60) -> FirstJob:
        """Wait for the user's association in slurmdbd, then retry `srun -A ACCOUNT id` as `user`
        until it succeeds (slurmctld has the association and resolved the user). The piece a
        benchmark times from a POST to a person's first job: call it right after the POST.

        It looks the user up on the node only once the association exists. slurmctld resolves a
        user's uid when slurmdbd sends it the association and, if NSS says "no such user" then,
        refuses their jobs until `scontrol reconfigure` or its hourly retry. A lookup before SUP
        wrote the user would leave that answer in sssd's negative cache (seen: first jobs refused
        for a minute and more)."""
        started = time.monotonic()
        where = ["where", f"cluster={self.cluster}", f"account={account}", f"user={user}"]
        while not self.slurmdbd.show("association", *where, "format=User"):
            if time.monotonic() - started > timeout:
                raise AssertionError(f"{user} has no association with {account} after {timeout} s")
            time.sleep(0.05)
        associated = time.monotonic() - started
        attempts, last = 0, "never tried"
        while time.monotonic() - started < timeout:
            attempts += 1
            try:
                job = self.srun(user, "-A", account, "id")
            except LookupError as exc:
                last = str(exc)
            else:
                if job.returncode == 0:
                    return FirstJob(job, associated, time.monotonic() - started, attempts)
                last = job.output.strip()
            time.sleep(0.1)
        raise AssertionError(f"{user}'s first job did not run within {timeout} s: {last}")

    def as_root_argv(self, *argv: str) -> list[str]:
        """`argv` as a command line that runs it as root in the namespace with this cluster's
        slurm.conf (for a setting that names a command, such as slurm.running_jobs_command)."""
        return [*self._nsenter(self.root), "env", f"SLURM_CONF={self.conf}", *argv]

    def reconfigure(self) -> None:
        """`scontrol reconfigure`: among other things slurmctld then resolves the uids of users it
        could not resolve when their associations arrived."""
        done = self._slurm("scontrol", "reconfigure")
        assert done.returncode == 0, done.stderr

    def cancel(self, *job_ids: str) -> None:
        self._slurm("scancel", *job_ids)

    def cancel_all(self) -> None:
        """Cancel every job (between tests)."""
        jobs = self._job_ids()
        if jobs:
            self._slurm("scancel", *jobs)
            # Gone from slurmctld before the accounting reset: slurmdbd refuses to remove the
            # association of a job it still counts as running.
            self._wait(lambda: not self._job_ids(), "all jobs cancelled", 30)

    def _job_ids(self) -> list[str]:
        return self._slurm("squeue", "-h", "-o", "%i").stdout.split()


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


def start_job_cluster(slapd: SlapdServer, slurmdbd: SlurmdbdServer, partition: str = PARTITION) -> JobCluster:
    """An LDAP base for SUP, an sssd reading it, slurmctld + slurmd beside `slurmdbd` in sssd's
    namespace (its one partition: `partition`). Raises SlurmctldUnavailable (or SssdUnavailable)
    when this machine cannot run it."""
    base_dn = slapd.new_base("jobs")
    ldap = slapd.ldap_settings(base_dn, timeout_seconds=3)
    sssd = NodeSssd(
        render(LdapSettings.model_validate(ldap), options=list(SSSD_TEST_OPTIONS)),
        negative_timeout=NEGATIVE_TIMEOUT,
    ).start()
    try:
        controller = SlurmController(slurmdbd, sssd, partition).start()
    except BaseException:
        sssd.stop()
        raise
    return JobCluster(slapd, base_dn, ldap, sssd, controller)
