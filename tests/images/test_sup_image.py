"""SUP's image, run from its unpacked root as the chart runs it (uid 10001, its working directory,
its environment): the CLI works and `sup serve` answers on SQLite; with the chart's Slurm sidecar,
sacctmgr runs and gets SUP's own munge credential."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import httpx
import pytest

from tests.support.chroot import Chroot, Identity, make_emptydir, run, start
from tests.support.images import Images, image_config
from tests.support.ports import free_port
from tests.support.processes import stop_process

pytestmark = pytest.mark.timeout(1800)  # the first test may build the images

SUP = Identity(10001, 10001, (10001,))  # the chart's runAsUser, runAsGroup and fsGroup


def _environment(images: Images) -> dict[str, str]:
    return dict(item.split("=", 1) for item in image_config(images.sup).get("Env", []))


def test_image_runs_sup_serve_as_uid_10001(images: Images) -> None:
    config = image_config(images.sup)
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["sup"]
    assert config["Cmd"] == ["serve", "--host", "0.0.0.0", "--port", "8080"]
    assert config["WorkingDir"] == "/var/lib/sup"


def test_cli_and_serve_on_sqlite_with_a_read_only_root(
    images: Images, sup_root: Path, tmp_path: Path
) -> None:
    """As the chart runs it: read-only root filesystem, a writable /tmp; the SQLite file on a volume."""
    data = make_emptydir(tmp_path / "data", owner=SUP.uid, mode=0o755)
    chroot = Chroot(sup_root, {"/tmp": make_emptydir(tmp_path / "tmp", mode=0o1777), "/data": data})
    env = {**_environment(images), "SUP_DATABASE_URL": "sqlite:////data/sup.db"}

    def command(*argv: str) -> list[str]:
        return chroot.command(argv, identity=SUP, env=env, workdir="/var/lib/sup", read_only=True)

    assert run(command("touch", "/var/lib/sup/x")).returncode != 0  # the root is read-only

    assert "serve" in run(command("sup", "--help")).stdout
    upgraded = run(command("sup", "db", "upgrade"), timeout=120)
    assert upgraded.returncode == 0, upgraded.stderr
    port = free_port()
    log = tmp_path / "serve.log"
    server = start(command("sup", "serve", "--host", "127.0.0.1", "--port", str(port)), log)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, log.read_text()
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
    finally:
        stop_process(server)
    assert (data / "sup.db").stat().st_uid == SUP.uid


MUNGE_UID = 994  # the chart's slurm.mungeUid


def test_the_image_carries_the_slurm_client_and_munge_but_no_key(pristine_roots: dict[str, Path]) -> None:
    """What the chart's `slurm.enabled` runs from SUP's image (docs/slurm.md): sacctmgr, munged and the
    sidecar's script; never a munge key, no setuid or setgid program, no apt lists or docs."""
    root = pristine_roots["sup"]
    for program in ("usr/bin/sacctmgr", "usr/sbin/munged", "usr/bin/munge", "usr/local/sbin/sup-munged"):
        assert (root / program).is_file(), program
    assert not (root / "etc/munge/munge.key").exists()
    assert not (root / "var/lib/munge").exists() or list((root / "var/lib/munge").iterdir()) == []
    special = [
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink() and path.stat().st_mode & (stat.S_ISUID | stat.S_ISGID)
    ]
    assert special == []
    assert list((root / "var/lib/apt/lists").glob("*_Packages*")) == []
    assert (root / "etc/slurm").is_dir() and (root / "run/munge").is_dir()  # the chart's mount points


def test_sacctmgr_gets_sups_own_credential_from_the_munge_sidecar(
    images: Images, sup_root: Path, tmp_path: Path
) -> None:
    """The pod as the chart runs it with slurm.enabled, both containers from SUP's image with a
    read-only root: munged as the munge uid reads the key Secret (root's, 0440 through the fsGroup)
    and serves the shared emptyDir; SUP's container, which mounts no key, runs sacctmgr and gets a
    credential for its own uid (10001) from that socket."""
    secret = make_emptydir(tmp_path / "munge-key", mode=0o755)
    (secret / "munge.key").write_bytes(os.urandom(1024))
    os.chown(secret / "munge.key", 0, SUP.gid)
    (secret / "munge.key").chmod(0o440)  # a Secret with defaultMode 0400 and fsGroup 10001
    state = make_emptydir(tmp_path / "munge-state")
    sockets = make_emptydir(tmp_path / "munge-socket")
    slurm = make_emptydir(tmp_path / "slurm", mode=0o755)
    (slurm / "slurm.conf").write_text("ClusterName=test\nSlurmctldHost=localhost\n")
    chroot = Chroot(sup_root, {"/tmp": make_emptydir(tmp_path / "tmp", mode=0o1777)})
    munged = start(
        chroot.command(
            ["/usr/local/sbin/sup-munged"],
            identity=Identity(MUNGE_UID, MUNGE_UID, (MUNGE_UID, SUP.gid)),  # fsGroup: a supplementary group
            env={"PATH": "/usr/sbin:/usr/bin:/bin"},
            mounts={"/var/lib/munge": state, "/run/munge": sockets},
            read_only_mounts={"/etc/munge-key": secret},
            read_only=True,
        ),
        tmp_path / "munged.log",
    )
    try:
        deadline = time.monotonic() + 20
        while not (sockets / "munge.socket.2").exists():
            assert munged.poll() is None and time.monotonic() < deadline, (
                tmp_path / "munged.log"
            ).read_text()
            time.sleep(0.1)
        env = {**_environment(images), "SLURM_CONF": "/etc/slurm/slurm.conf"}
        result = run(
            chroot.command(
                ["bash", "-c", "sacctmgr --version; munge -n | unmunge; ls /etc/munge-key /var/lib/munge"],
                identity=SUP,
                env=env,
                workdir="/var/lib/sup",
                read_only=True,
                read_only_mounts={"/run/munge": sockets, "/etc/slurm": slurm},
            )
        )
        assert result.stdout.startswith("slurm-wlm 22.05."), result.stdout + result.stderr
        fields = [line.split() for line in result.stdout.splitlines()]
        assert ["STATUS:", "Success", "(0)"] in fields, (tmp_path / "munged.log").read_text()
        assert ["UID:", "sup", "(10001)"] in fields  # SUP's own uid, as slurmdbd will see it
        assert "munge.key" not in result.stdout  # SUP's container has neither the Secret nor the copy
        copy = state / "munge.key"
        assert (copy.stat().st_uid, stat.S_IMODE(copy.stat().st_mode)) == (MUNGE_UID, 0o400)
    finally:
        stop_process(munged)
