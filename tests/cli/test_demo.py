"""README's first command keeps working: scripts/demo sets up a local stack of the real servers, runs
SUP on SQLite, loads the sample data, and SUP provisions it into LDAP (seen through sssd), Slurm and
Kubernetes, where the demo user logs in to her login pod with ssh, and through the gateway runs a
Slurm job whose output she reads from her home."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.cli import run_sup, sup_env
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_demo_seeds_sample_users_and_is_rerunnable(tmp_path: Path) -> None:
    env = sup_env(SUP_DEMO_DIR=str(tmp_path), SUP_DEMO_PORT=str(free_port()))
    for _ in range(2):  # the second run finds everything in place and still succeeds
        result = subprocess.run(
            [str(ROOT / "scripts" / "demo"), "--once"], env=env, capture_output=True, text=True, timeout=600
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        assert "SUP is running on" in result.stdout
        lines = {" ".join(line.split()) for line in result.stdout.splitlines()}
        # What the demo prints is read back from the servers: sssd's getent, sacctmgr, the API server.
        assert "kim:*:10000:10000:Kim Wexler:/home/kim:/bin/bash" in lines
        assert "account=ml user=kim" in lines and "account=physics user=saul" in lines, result.stdout
        assert not any("user=nacho" in line for line in lines)  # suspended: no associations
        assert "statefulsets: login-howard, login-kim, login-saul" in lines
        # ... and on the real node kim logs in to her pod with ssh: who she is there, and her home
        ssh = result.stdout.split("== kim logs in to her login pod")[-1]
        assert "uid=10000(kim) gid=10000(kim) groups=10000(kim)," in ssh, result.stdout[-3000:]
        assert "(physics)" in ssh and "HOME=/home/kim" in ssh
        # ... and through the gateway she writes a job script in her home on the shared filesystem,
        # `sbatch`es it, and reads what the job wrote there, in her pod
        path = result.stdout.split("== kim, through the gateway")[-1]
        assert "landed as kim on login-kim-0" in path, result.stdout[-3000:]
        ran = [line.strip() for line in path.splitlines() if line.strip().startswith("job ")]
        assert len(ran) == 1 and ran[0].startswith("job ") and " ran as kim on " in ran[0], path
        assert ran[0].endswith("account physics") and "its working directory: /home/kim" in path
    database = sup_env(SUP_DATABASE_URL=f"sqlite:///{tmp_path / 'sup.db'}")
    users = run_sup("user", "list", "--json", env=database)
    by_name = {u["username"]: u for u in json.loads(users.stdout)}
    expected = json.loads((ROOT / "examples" / "demo.json").read_text())
    assert set(by_name) == {u["username"] for u in expected["users"]}
    assert by_name["kim"]["groups"] == ["ml-research", "physics"]
    assert by_name["nacho"]["active"] is False
    assert (tmp_path / "admin-token").stat().st_mode & 0o077 == 0  # the token file is private
