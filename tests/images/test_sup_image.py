"""SUP's image, run from its unpacked root as the chart runs it (uid 10001, its working directory,
its environment): the CLI works and `sup serve` answers on SQLite."""

from __future__ import annotations

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
