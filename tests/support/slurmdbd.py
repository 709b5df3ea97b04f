"""A throwaway Slurm accounting stack: munged, MariaDB and slurmdbd, in a temp dir on free ports.

Used by the Slurm target's tests (tests/slurm/conftest.py) and by bench/slurm_bench.py. Nothing here
touches the machine's own services: MariaDB gets its own datadir, socket, port and `--no-defaults`
(a system MariaDB, if one runs, is neither used nor disturbed); munged gets its own key, socket, pid
and seed files; slurmdbd and sacctmgr find their configuration through SLURM_CONF, and the munge
socket through `AuthInfo=socket=...` (slurmdbd) and `AccountingStoragePass` (clients: that is how
Slurm names the munge socket for talking to slurmdbd).

When run as root, MariaDB runs as `mysql` and slurmdbd as `slurm` (the Debian packages create both);
otherwise everything runs as the current user. sacctmgr runs as the caller, and root is always a
Slurm super-user.

Clients elsewhere (SUP's pod, installed from the chart) reach slurmdbd at the host's address on the
pod bridge: slurmdbd listens on every address of the host (Slurm 22.05 has no option to bind one),
`client_conf(address)` is their slurm.conf and `munge_key` their munged's key. Such a client's uid
must resolve on slurmdbd's host for it to be granted an AdminLevel, as on a site's slurmdbd host: as
root, slurmdbd runs in a private mount namespace whose /etc/passwd adds `SUP_USER` for SUP's uid
(10001, the uid of SUP's image and the chart's runAsUser); nothing changes the machine's own.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tests.support.ports import free_port
from tests.support.processes import stop_process

DB_PASSWORD = "sup-test-slurmdbd"  # a test fixture's password; never used anywhere else
SUP_UID = 10001  # SUP's image's uid (the chart's podSecurityContext.runAsUser)
SUP_USER = "sup-service"  # its name in slurmdbd's passwd (not "sup": that may be the cluster's name)
REQUIRED = ("munged", "mungekey", "mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "sacctmgr")


class SlurmdbdUnavailable(RuntimeError):
    pass


def _which(name: str) -> str:
    for directory in (*os.environ.get("PATH", "").split(os.pathsep), "/usr/sbin", "/usr/bin", "/sbin"):
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise SlurmdbdUnavailable(
        f"{name} is not installed; apt-get install munge mariadb-server slurmdbd slurm-client "
        "(or run scripts/setup --dev as root)"
    )


def _user(name: str) -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(name)
    except KeyError as exc:
        raise SlurmdbdUnavailable(f"running as root but there is no {name!r} OS user") from exc


class SlurmdbdServer:
    """Start with `start()`, stop with `stop()`. `env` is what a sacctmgr client needs (SLURM_CONF)."""

    def __init__(self, cluster: str = "sup") -> None:
        self.bin = {name: _which(name) for name in REQUIRED}
        self.root = Path(tempfile.mkdtemp(prefix="sup-slurmdbd-"))
        self.root.chmod(0o755)  # munged refuses a socket directory that others cannot traverse
        self.cluster = cluster
        self.db_port = free_port()
        self.dbd_port = free_port()
        self.mysql = _user("mysql")
        self.slurm = _user("slurm")
        self.munge_dir = self.root / "munge"
        self.db_dir = self.root / "mariadb"
        self.dbd_dir = self.root / "slurm"
        self.munge_socket = self.munge_dir / "munge.socket"
        self.db_socket = self.db_dir / "mariadb.sock"
        self.slurm_conf = self.dbd_dir / "slurm.conf"
        self._processes: list[subprocess.Popen[bytes]] = []

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.slurm_conf)
        return env

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.dbd_port}"

    @property
    def munge_key(self) -> bytes:
        """The munge key slurmdbd's munged holds: what a client's munged needs (e.g. in a Secret)."""
        return (self.munge_dir / "munge.key").read_bytes()

    def client_conf(self, address: str, cluster: str | None = None) -> str:
        """The slurm.conf of a client elsewhere (a pod) reaching slurmdbd at `address` (e.g. the
        host's address on the pod bridge), for `cluster` (default this server's), through a munged
        at munge's default socket (/run/munge/munge.socket.2) holding `munge_key`. For sacctmgr only:
        no controller runs behind SlurmctldHost."""
        lines = [
            f"ClusterName={cluster or self.cluster}",
            "SlurmctldHost=localhost",
            "AuthType=auth/munge",
            "AccountingStorageType=accounting_storage/slurmdbd",
            f"AccountingStorageHost={address}",
            f"AccountingStoragePort={self.dbd_port}",
            "NodeName=localhost CPUs=1 State=UNKNOWN",
            "PartitionName=debug Nodes=localhost Default=YES",
        ]
        return "\n".join(lines) + "\n"

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        try:
            self._start_munge()
            self._start_mariadb()
            self._start_slurmdbd()
            self.sacctmgr("add", "cluster", self.cluster)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for process in reversed(self._processes):
            stop_process(process, timeout=20)
        self._processes.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def _spawn(self, argv: Sequence[str], log: Path, as_user: pwd.struct_passwd | None) -> None:
        prefix = ["runuser", "-u", as_user.pw_name, "--"] if as_user is not None else []
        with log.open("ab") as handle:
            process = subprocess.Popen(
                [*prefix, *argv], stdout=handle, stderr=subprocess.STDOUT, env=self.env, cwd=self.root
            )
        self._processes.append(process)

    def _wait(self, what: str, ready: object, log: Path, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if callable(ready) and ready():
                return
            if self._processes and self._processes[-1].poll() is not None:
                break
            time.sleep(0.1)
        text = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
        raise SlurmdbdUnavailable(f"{what} did not start; its log ends with:\n{text}")

    def _chown(self, path: Path, owner: pwd.struct_passwd | None) -> None:
        if owner is not None:
            os.chown(path, owner.pw_uid, owner.pw_gid)

    # --- munge -----------------------------------------------------------------------------------

    def _start_munge(self) -> None:
        self.munge_dir.mkdir(mode=0o755)
        key = self.munge_dir / "munge.key"
        subprocess.run(
            [self.bin["mungekey"], "--create", f"--keyfile={key}"], check=True, capture_output=True
        )
        key.chmod(0o600)
        log = self.munge_dir / "munged.log"
        self._spawn(
            [
                self.bin["munged"],
                "--foreground",
                f"--socket={self.munge_socket}",
                f"--key-file={key}",
                f"--pid-file={self.munge_dir / 'munged.pid'}",
                f"--log-file={log}",
                f"--seed-file={self.munge_dir / 'munged.seed'}",
            ],
            log,
            None,
        )
        self._wait("munged", self.munge_socket.exists, log)

    # --- MariaDB ---------------------------------------------------------------------------------

    def _start_mariadb(self) -> None:
        self.db_dir.mkdir(mode=0o755)
        self._chown(self.db_dir, self.mysql)
        user = [f"--user={self.mysql.pw_name}"] if self.mysql is not None else []
        datadir = self.db_dir / "data"
        install = subprocess.run(
            [
                self.bin["mariadb-install-db"],
                "--no-defaults",
                f"--datadir={datadir}",
                *user,
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if install.returncode != 0:
            raise SlurmdbdUnavailable(f"mariadb-install-db failed: {install.stdout[-2000:]}{install.stderr}")
        log = self.db_dir / "error.log"
        self._spawn(
            [
                self.bin["mariadbd"],
                "--no-defaults",
                f"--datadir={datadir}",
                *user,
                f"--socket={self.db_socket}",
                f"--port={self.db_port}",
                "--bind-address=127.0.0.1",
                f"--pid-file={self.db_dir / 'mariadbd.pid'}",
                f"--log-error={log}",
                "--skip-name-resolve",
                "--skip-log-bin",
                # What Slurm's documentation recommends, and test-server durability settings.
                "--innodb-buffer-pool-size=256M",
                "--innodb-log-file-size=64M",
                "--innodb-lock-wait-timeout=900",
                "--innodb-flush-log-at-trx-commit=2",
                "--sync-binlog=0",
            ],
            log,
            None,
        )
        self._wait("MariaDB", lambda: self._sql("SELECT 1", check=False).returncode == 0, log)
        self._sql(
            "CREATE DATABASE slurm_acct_db;"
            f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{DB_PASSWORD}';"
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
        )

    def _sql(self, statement: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.bin["mariadb"], "--no-defaults", f"--socket={self.db_socket}", "-u", "root", "-N", "-B"],
            input=statement,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"SQL failed: {result.stderr.strip()}")
        return result

    def sql(self, statement: str) -> str:
        """Run SQL against slurmdbd's database (tests use it to fake a running job)."""
        return self._sql(f"USE slurm_acct_db; {statement}").stdout

    def fake_running_job(self, cluster: str, account: str, user: str, job_id: int) -> None:
        """A job row as slurmctld would record it for a running job of the association: what makes
        slurmdbd refuse to remove that association ("Job(s) active")."""
        self.sql(
            f"INSERT INTO {cluster}_job_table (id_job, id_assoc, id_user, id_group, job_name, `partition`,"
            " state, time_submit, time_eligible, time_start, time_end, gres_used, wckey, work_dir,"
            " tres_alloc, tres_req, account, cpus_req, id_array_job, het_job_id, het_job_offset, id_qos,"
            " id_resv, id_wckey, kill_requid, state_reason_prev, nodes_alloc, priority, env_hash_inx,"
            f" script_hash_inx) SELECT {job_id}, id_assoc, 1000, 1000, 'sim', 'debug', 1,"
            " UNIX_TIMESTAMP(), UNIX_TIMESTAMP(), UNIX_TIMESTAMP(), 0, '', '', '/tmp', '', '', acct, 1, 0, 0,"
            " 4294967294, 1, 0, 0, 4294967295, 0, 1, 1, 0, 0"
            f" FROM {cluster}_assoc_table WHERE user='{user}' AND acct='{account}' AND deleted=0"
        )

    def finish_job(self, cluster: str, job_id: int) -> None:
        self.sql(f"UPDATE {cluster}_job_table SET state=3, time_end=UNIX_TIMESTAMP() WHERE id_job={job_id}")

    # --- slurmdbd --------------------------------------------------------------------------------

    def _start_slurmdbd(self) -> None:
        self.dbd_dir.mkdir(mode=0o755)
        self._chown(self.dbd_dir, self.slurm)
        slurm_user = self.slurm.pw_name if self.slurm is not None else pwd.getpwuid(os.geteuid()).pw_name
        dbd_conf = self.dbd_dir / "slurmdbd.conf"
        dbd_conf.write_text(
            "\n".join(
                [
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={self.munge_socket}",
                    "DbdHost=localhost",
                    "DbdAddr=127.0.0.1",
                    f"DbdPort={self.dbd_port}",
                    f"SlurmUser={slurm_user}",
                    f"PidFile={self.dbd_dir / 'slurmdbd.pid'}",
                    f"LogFile={self.dbd_dir / 'slurmdbd.log'}",
                    "DebugLevel=info",
                    "StorageType=accounting_storage/mysql",
                    "StorageHost=127.0.0.1",
                    f"StoragePort={self.db_port}",
                    "StorageUser=slurm",
                    f"StoragePass={DB_PASSWORD}",
                    "StorageLoc=slurm_acct_db",
                    "",
                ]
            )
        )
        dbd_conf.chmod(0o600)
        self._chown(dbd_conf, self.slurm)
        self.slurm_conf.write_text(
            "\n".join(
                [
                    f"ClusterName={self.cluster}",
                    "SlurmctldHost=localhost",
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={self.munge_socket}",
                    "AccountingStorageType=accounting_storage/slurmdbd",
                    "AccountingStorageHost=127.0.0.1",
                    f"AccountingStoragePort={self.dbd_port}",
                    f"AccountingStoragePass={self.munge_socket}",
                    "NodeName=localhost CPUs=1 State=UNKNOWN",
                    "PartitionName=debug Nodes=localhost Default=YES",
                    "",
                ]
            )
        )
        self.slurm_conf.chmod(0o644)
        self._run_slurmdbd()
        self._register_gpu_tres()

    def _run_slurmdbd(self) -> None:
        log = self.dbd_dir / "slurmdbd.out"
        if self.slurm is None:
            self._spawn([self.bin["slurmdbd"], "-D"], log, None)
        else:  # as root: with SUP's uid resolving (see the module's docstring)
            bind = 'mount --bind "$0" /etc/passwd && exec "$@"'
            argv = ["runuser", "-u", self.slurm.pw_name, "--", self.bin["slurmdbd"], "-D"]
            unshare = ["unshare", "--mount", "--propagation", "private", "sh", "-c", bind]
            self._spawn([*unshare, str(self._passwd()), *argv], log, None)
        self._wait("slurmdbd", lambda: self.sacctmgr_result("show", "cluster").returncode == 0, log)

    def _passwd(self) -> Path:
        """The machine's /etc/passwd, plus SUP_USER as SUP_UID unless that uid is already known."""
        passwd = self.dbd_dir / "passwd"
        text = Path("/etc/passwd").read_text()
        try:
            pwd.getpwuid(SUP_UID)
        except KeyError:
            text += f"{SUP_USER}:x:{SUP_UID}:{SUP_UID}:SUP (tests):/nonexistent:/usr/sbin/nologin\n"
        passwd.write_text(text)
        passwd.chmod(0o644)
        return passwd

    def _register_gpu_tres(self) -> None:
        """Make `gres/gpu` a known TRES, as on a GPU cluster, so GrpTRES=gres/gpu=N limits work.

        On a cluster, slurmctld registers the TRES of AccountingStorageTRES (gres/gpu) with slurmdbd;
        there is no slurmctld here, so the row goes into tres_table directly and slurmdbd, which loads
        TRES when it starts, is restarted. Without it sacctmgr refuses such limits with "no TRES known
        by type gres/gpu".
        """
        self.sql(
            "INSERT INTO tres_table (creation_time, type, name) SELECT UNIX_TIMESTAMP(), 'gres', 'gpu'"
            " FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM tres_table WHERE type='gres' AND name='gpu')"
        )
        slurmdbd = self._processes.pop()
        slurmdbd.send_signal(signal.SIGTERM)
        slurmdbd.wait(timeout=30)
        self._run_slurmdbd()

    # --- outages (fault tests) -------------------------------------------------------------------

    def kill_slurmdbd(self) -> None:
        """SIGKILL slurmdbd (by its pid file: it runs under runuser), as a crashed daemon; MariaDB and
        munge stay up. sacctmgr then fails with "Connection refused" until `restart_slurmdbd()`."""
        pid_file = self.dbd_dir / "slurmdbd.pid"
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.sacctmgr_result("show", "cluster").returncode == 0:
            time.sleep(0.1)
        pid_file.unlink(missing_ok=True)

    def restart_slurmdbd(self) -> None:
        self._run_slurmdbd()

    # --- clients ---------------------------------------------------------------------------------

    def sacctmgr_result(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.bin["sacctmgr"], "-i", *args],
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )

    def sacctmgr(self, *args: str) -> str:
        result = self.sacctmgr_result(*args)
        if result.returncode != 0:
            raise RuntimeError(f"sacctmgr {' '.join(args)} failed: {result.stdout}{result.stderr}")
        return result.stdout

    def show(self, *args: str) -> list[list[str]]:
        """`sacctmgr -n -P show ...` as rows of fields."""
        result = self.sacctmgr_result("-n", "-P", "show", *args)
        if result.returncode != 0:
            raise RuntimeError(f"sacctmgr show {' '.join(args)} failed: {result.stderr}")
        return [line.split("|") for line in result.stdout.splitlines() if line]

    def reset(self, keep_clusters: Sequence[str] = ()) -> None:
        """Remove every cluster, account and user but the root ones (between tests)."""
        clusters = [r[0] for r in self.show("cluster", "format=Cluster") if r[0] not in keep_clusters]
        users = [r[0] for r in self.show("user", "format=User") if r[0] != "root"]
        accounts = [r[0] for r in self.show("account", "format=Account") if r[0] != "root"]
        with contextlib.suppress(RuntimeError):
            if users:
                self.sacctmgr("delete", "user", "where", "name=" + ",".join(users))
        with contextlib.suppress(RuntimeError):
            if accounts:
                self.sacctmgr("delete", "account", "where", "name=" + ",".join(accounts))
        for cluster in clusters:
            with contextlib.suppress(RuntimeError):
                self.sacctmgr("delete", "cluster", cluster)
