"""The login image's sup-sshd-forwarding (images/login): the kube settings' environment variables
become sshd's forwarding options, absent ones change nothing, and a value sshd would read otherwise
than the site meant stops the pod (run as the image runs it: bash, no Kubernetes)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "images" / "login" / "sup-sshd-forwarding"


def _run(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT)], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("env", "options"),
    [
        ({}, []),  # an older render: OpenSSH's defaults, as before
        ({"SUP_SSH_ALLOW_TCP_FORWARDING": "local"}, ["-o", "AllowTcpForwarding=local"]),
        (
            {"SUP_SSH_ALLOW_TCP_FORWARDING": "no", "SUP_SSH_ALLOW_AGENT_FORWARDING": "no"},
            ["-o", "AllowTcpForwarding=no", "-o", "AllowAgentForwarding=no"],
        ),
        ({"SUP_SSH_ALLOW_AGENT_FORWARDING": "yes"}, ["-o", "AllowAgentForwarding=yes"]),
    ],
)
def test_settings_become_sshd_options(env: dict[str, str], options: list[str]) -> None:
    result = _run(**env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == options


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"SUP_SSH_ALLOW_TCP_FORWARDING": "all"},
            "SUP_SSH_ALLOW_TCP_FORWARDING must be yes, local, remote or no, not 'all'",
        ),
        (
            {"SUP_SSH_ALLOW_TCP_FORWARDING": "no -o PermitRootLogin=yes"},
            "not 'no -o PermitRootLogin=yes'",
        ),
        ({"SUP_SSH_ALLOW_AGENT_FORWARDING": ""}, "SUP_SSH_ALLOW_AGENT_FORWARDING must be yes or no, not ''"),
    ],
)
def test_a_value_sshd_was_not_meant_to_get_stops_the_pod(env: dict[str, str], message: str) -> None:
    result = _run(**{"SUP_SSH_ALLOW_TCP_FORWARDING": "local", **env})
    assert result.returncode == 64
    assert result.stdout == ""
    assert message in result.stderr
