"""One pass on a real directory tree, as root: owners, modes, refusals, never through a symlink,
nothing deleted; and `sup homes sync --once` with its exit codes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sup.config.home_dirs import HomeDirsSettings
from sup.home_dirs.service import sync

pytestmark = pytest.mark.usefixtures("as_root")


def line(name: str, uid: int, home: str) -> str:
    return f"{name}:x:{uid}:{uid + 100}:{name}:{home}:/bin/bash\n"


def settings(mount: Path) -> HomeDirsSettings:
    return HomeDirsSettings(namespace="users", mount=str(mount), home_root="/home", metrics_port=None)


def owner_mode(path: Path) -> tuple[int, int, int]:
    info = os.lstat(path)
    return info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)


def test_a_pass_makes_fixes_and_refuses_as_it_should(tmp_path: Path) -> None:
    mount = tmp_path / "homes"
    mount.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (mount / "kubelet").mkdir()  # the kubelet's subPath: root-owned and empty
    (mount / "taken").mkdir()
    os.chown(mount / "taken", 3000, 3000)  # somebody else's
    (mount / "taken" / "their-file").write_text("theirs")
    (mount / "eve").symlink_to(outside)  # a symlink at a home's path
    (mount / "lab").symlink_to(outside)  # a symlink on the way to one
    files = {
        "login": line("alice", 2001, "/home/alice")
        + line("kube", 2002, "/home/kubelet")
        + line("carol", 2003, "/home/taken")
        + line("eve", 2004, "/home/eve")
        + line("bob", 2005, "/home/lab/bob")
        + line("dan", 2006, "/home/deep/er/dan")
        + line("out", 2007, "/srv/out")
    }
    outcome = sync(settings(mount), files)
    assert sorted(outcome.made) == ["alice", "deep/er/dan"]
    assert outcome.fixed == ["kubelet"]
    assert sorted(r.what for r in outcome.refused) == ["/srv/out", "eve", "lab/bob", "taken"]
    assert owner_mode(mount / "alice") == (2001, 2101, 0o700)
    assert owner_mode(mount / "kubelet") == (2002, 2102, 0o700)
    assert owner_mode(mount / "deep") == (0, 0, 0o755)
    assert owner_mode(mount / "deep" / "er") == (0, 0, 0o755)
    assert owner_mode(mount / "deep" / "er" / "dan") == (2006, 2106, 0o700)
    # never followed, never handed over
    assert owner_mode(outside)[:2] == (0, 0)
    assert list(outside.iterdir()) == []
    assert (mount / "eve").is_symlink() and (mount / "lab").is_symlink()
    assert owner_mode(mount / "taken")[:2] == (3000, 3000)
    assert (mount / "taken" / "their-file").read_text() == "theirs"
    # a second pass has nothing to do
    again = sync(settings(mount), files)
    assert (again.made, again.fixed, again.moved, len(again.refused)) == ([], [], [], 4)


def test_a_rename_moves_the_persons_directory_and_nothing_is_deleted(tmp_path: Path) -> None:
    mount = tmp_path / "homes"
    mount.mkdir()
    sync(settings(mount), {"login": line("alice", 2001, "/home/alice") + line("bob", 2002, "/home/bob")})
    (mount / "alice" / "job.sh").write_text("#!/bin/sh\n")
    # alice becomes alicia; bob is removed: his directory stays
    outcome = sync(settings(mount), {"login": line("alicia", 2001, "/home/alicia")})
    assert outcome.moved == ["alicia"] and outcome.made == [] and outcome.refused == []
    assert (mount / "alicia" / "job.sh").read_text() == "#!/bin/sh\n"
    assert not (mount / "alice").exists()
    assert owner_mode(mount / "bob") == (2002, 2102, 0o700)
    # a new person at bob's old path is not given his directory
    outcome = sync(
        settings(mount), {"login": line("alicia", 2001, "/home/alicia") + line("bo", 2009, "/home/bob")}
    )
    assert [r.what for r in outcome.refused] == ["bob"]
    assert owner_mode(mount / "bob")[0] == 2002


def test_a_symlink_swapped_in_for_a_parent_is_not_followed_when_making(tmp_path: Path) -> None:
    mount = tmp_path / "homes"
    mount.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    (mount / "lab").symlink_to(target)
    outcome = sync(settings(mount), {"login": line("bob", 2002, "/home/lab/bob")})
    assert outcome.made == [] and "not a directory (or a symlink)" in outcome.refused[0].reason
    assert list(target.iterdir()) == []


def _cli(mount: Path, passwd: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "sup.yaml"
    config.write_text(
        f"home_dirs:\n  namespace: users\n  mount: {mount}\n  metrics_port: null\nlog:\n  format: text\n"
    )
    env = {**os.environ, "SUP_CONFIG": str(config)}
    command = ["homes", "sync", "--once", "--passwd", str(passwd), *extra]
    return subprocess.run(
        [sys.executable, "-c", "from sup.cli import main; main()", *command],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip


def test_sync_once_exits_8_when_something_is_refused(tmp_path: Path) -> None:
    mount = tmp_path / "homes"
    mount.mkdir()
    passwd = tmp_path / "passwd"
    passwd.write_text(line("alice", 2001, "/home/alice"))
    done = _cli(mount, passwd, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "made=1" in done.stdout
    assert owner_mode(mount / "alice") == (2001, 2101, 0o700)
    passwd.write_text(line("alice", 2001, "/home/alice") + line("out", 2002, "/elsewhere/out"))
    done = _cli(mount, passwd, tmp_path)
    assert done.returncode == 8
    assert "refused /elsewhere/out" in done.stderr and "not under the home root /home" in done.stderr
    # for scripts: the same exit code, the counts and each refusal; -o yaml is the same as -o json
    as_json = _cli(mount, passwd, tmp_path, "-o", "json")
    as_yaml = _cli(mount, passwd, tmp_path, "-o", "yaml")
    assert as_json.returncode == as_yaml.returncode == 8
    data = json.loads(as_json.stdout)
    assert yaml.safe_load(as_yaml.stdout) == data
    assert data["counts"] == {"made": 0, "fixed": 0, "moved": 0, "refused": 1, "homes": 1}
    assert [r["what"] for r in data["refused"]] == ["/elsewhere/out"]
    assert "not under the home root /home" in data["refused"][0]["reason"]


def test_a_rename_out_of_a_deeper_directory_finds_the_old_home(tmp_path: Path) -> None:
    mount = tmp_path / "homes"
    mount.mkdir()
    sync(settings(mount), {"login": line("alice", 2001, "/home/old/lab/alice")})
    (mount / "old" / "lab" / "alice" / "data").write_text("kept")
    outcome = sync(settings(mount), {"login": line("alice", 2001, "/home/alice")})
    assert outcome.moved == ["alice"] and outcome.made == []
    assert (mount / "alice" / "data").read_text() == "kept"
    assert owner_mode(mount / "old" / "lab") == (0, 0, 0o755)  # the parents stay


def test_sync_without_once_is_a_usage_error_and_without_a_section_not_ready(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "from sup.cli import main; main()", "homes", "sync"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUP_")}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 2 and "--once" in done.stderr
    done = subprocess.run(
        [*command, "--once"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 6 and "no `home_dirs` settings section" in done.stderr
