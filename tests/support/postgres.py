"""A throwaway PostgreSQL server: initdb in a temp dir, a free loopback port, trust auth.

`PostgresServer(listen=[...], clients=CIDR)` also listens on the given addresses (e.g. the test
node's address on its pod bridge, never the machine's external interfaces) and lets clients from
CIDR in with a password only (scram-sha-256): SUP's pods in the real test cluster.

Runs as the `postgres` OS user when the tests run as root (PostgreSQL refuses to run as root), else as
the current user. Durability is switched off (fsync, synchronous_commit): it is a test server.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tests.support.ports import free_port


class PostgresUnavailable(RuntimeError):
    pass


def find_bindir() -> Path:
    """The newest PostgreSQL server binaries: pg_config's bindir, Debian's layout, or $PATH."""
    explicit = os.environ.get("SUP_TEST_PG_BINDIR")
    candidates = [explicit] if explicit else []
    candidates += sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True
    )
    which = shutil.which("initdb")
    if which:
        candidates.append(str(Path(which).resolve().parent))
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    raise PostgresUnavailable(
        "no PostgreSQL server binaries (initdb, pg_ctl) found; apt-get install postgresql"
    )


class PostgresServer:
    def __init__(self, listen: Sequence[str] = (), clients: str | None = None) -> None:
        self.listen = ("127.0.0.1", *listen)
        self.clients = clients
        self.bindir = find_bindir()
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="sup-pg-"))
        self.datadir = self.root / "data"
        self.socketdir = self.root / "run"
        self.user = "postgres"
        self._as: Sequence[str] = ()
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError as exc:
                raise PostgresUnavailable("running as root but there is no 'postgres' OS user") from exc
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self._as = ("runuser", "-u", "postgres", "--")
        self.root.chmod(0o755)

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._as, *args], check=True, capture_output=True, text=True, timeout=120, cwd=self.root
        )

    def start(self) -> None:
        self._run("mkdir", "-p", str(self.socketdir))
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.datadir),
            "-U",
            self.user,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        if self.clients:
            with (self.datadir / "pg_hba.conf").open("a") as hba:  # as postgres: the file is its own
                hba.write(f"host all all {self.clients} scram-sha-256\n")
        self.up()

    def up(self) -> None:
        """Start the server on the data directory (after `start()` made it, and after `down()`)."""
        options = (
            f"-p {self.port} -c listen_addresses={','.join(self.listen)} "
            f"-c unix_socket_directories={self.socketdir} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        self._pg_ctl("-o", options, "-l", str(self.root / "server.log"), "-w", "-t", "60", "start")

    def down(self) -> None:
        """Stop the server (fast: every client connection is cut), keeping the data (fault tests)."""
        self._pg_ctl("-m", "fast", "-w", "-t", "60", "stop")

    def _pg_ctl(self, *args: str) -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), *args)

    def restart(self) -> None:
        """`down()` then `up()`: what an operator's restart (or a failover) looks like to clients."""
        self.down()
        self.up()

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url().replace("+psycopg", ""), autocommit=True) as connection:
            connection.execute(sql)

    def create_database(self, name: str, template: str | None = None) -> str:
        suffix = f" TEMPLATE {template}" if template else ""
        self.execute(f'CREATE DATABASE "{name}"{suffix}')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
