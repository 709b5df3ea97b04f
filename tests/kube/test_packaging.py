"""What the Dockerfile does, without a container engine: SUP's wheel builds, installs into a fresh
virtualenv with constraints.txt, `sup --help` runs, and each target's templates (and the LDAP
schemas) ship inside the wheel as package data, where the code finds them. tests/images builds and
runs the image itself."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, cwd: Path | None = None) -> str:
    result = subprocess.run(args, capture_output=True, text=True, timeout=280, check=False, cwd=cwd)
    assert result.returncode == 0, f"{args}: {result.stdout[-2000:]}{result.stderr[-2000:]}"
    return result.stdout


def test_the_wheel_installs_with_the_pinned_versions_and_runs(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(REPO))
    (wheel,) = wheels.glob("sup-*.whl")
    target = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(target)
    python = target / "bin" / "python"
    _run(str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--constraint", str(REPO / "constraints.txt"), str(wheel))  # fmt: skip
    assert "plan" in _run(str(target / "bin" / "sup"), "--help")
    where = _run(
        str(python), "-c",
        "from sup.targets.kube.render import shipped_templates; print(shipped_templates())",
        cwd=tmp_path,
    ).strip()  # fmt: skip
    shipped = Path(where)
    assert shipped.is_relative_to(target) and shipped.parts[-4:] == ("sup", "targets", "kube", "templates")
    repository = REPO / "sup" / "targets" / "kube" / "templates"
    assert {p.name for p in shipped.iterdir()} == {p.name for p in repository.iterdir()}
    sssd, schemas = _run(
        str(python), "-c",
        "from sup.targets.ldap.sssd_config import default_template; t = default_template();"
        " print(t); print(t.parents[1] / 'schema')",
        cwd=tmp_path,
    ).split()  # fmt: skip
    assert Path(sssd).is_relative_to(target) and Path(sssd).is_file()
    ldap = REPO / "sup" / "targets" / "ldap" / "schema"
    assert sorted(p.name for p in Path(schemas).iterdir()) == sorted(p.name for p in ldap.iterdir())
