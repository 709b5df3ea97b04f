"""`ssh_ca.plain_keys` reaches the derivation's policy: without a CA, or with plain keys on (the
default), login pods take people's keys; with `plain_keys: false`, certificates only."""

from __future__ import annotations

from typing import Any

import pytest

from sup.config import Settings
from sup.reconcile.planner import policy_of


@pytest.mark.parametrize(
    ("ssh_ca", "plain_keys"),
    [
        (None, True),
        ({"key_file": "/etc/sup/ssh-ca/ca"}, True),
        ({"key_file": "/etc/sup/ssh-ca/ca", "plain_keys": True}, True),
        ({"key_file": "/etc/sup/ssh-ca/ca", "plain_keys": False}, False),
    ],
    ids=["no-ca", "ca-default", "ca-plain-keys", "ca-certificates-only"],
)
def test_plain_keys_in_login_pods_follow_ssh_ca(ssh_ca: dict[str, Any] | None, plain_keys: bool) -> None:
    assert policy_of(Settings(ssh_ca=ssh_ca)).plain_keys_in_login_pods is plain_keys
