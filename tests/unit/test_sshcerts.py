"""The certificates SUP signs, read back by OpenSSH's own `ssh-keygen -L` and by cryptography's
parser (sup/domain/sshcerts.py). That sshd accepts them: tests/keycloak/test_ssh_certificates.py."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    SSHCertificate,
    load_ssh_public_identity,
)

from sup.config import Settings
from sup.config.ssh_ca import SshCaSettings
from sup.domain import sshcerts
from sup.domain.desired import DesiredState
from sup.errors import ConfigurationError
from sup.reconcile.steps import STEPS
from sup.ssh_ca.service import SshCa
from sup.ssh_ca.step import SSH_CA_STEP
from tests.support.keys import ed25519_key
from tests.support.sshd import keygen

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def _openssh_private(key: sshcerts.CaKey) -> bytes:
    return key.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption())


def _sign(ca: sshcerts.CaKey, public_key: str, **extra: object) -> sshcerts.Certificate:
    arguments: dict[str, object] = {
        "principal": "kim",
        "serial": 4242,
        "key_id": "sup:kim:4242",
        "now": NOW,
        "lifetime": timedelta(hours=12),
        "extensions": ["permit-pty", "permit-port-forwarding"],
        **extra,
    }
    return sshcerts.sign_user_certificate(ca, public_key, **arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "ca",
    [ed25519.Ed25519PrivateKey.generate(), ec.generate_private_key(ec.SECP256R1()),
     rsa.generate_private_key(public_exponent=65537, key_size=2048)],
    ids=["ed25519", "ecdsa", "rsa"],
)  # fmt: skip
def test_openssh_reads_the_certificate_as_signed(ca: sshcerts.CaKey, tmp_path: Path) -> None:
    loaded = sshcerts.load_ca_key(_openssh_private(ca))
    made = _sign(loaded, ed25519_key("kim@laptop"))
    path = tmp_path / "id-cert.pub"
    path.write_text(made.line + "\n")
    utc = {**os.environ, "TZ": "UTC"}  # ssh-keygen prints the validity in local time
    shown = subprocess.run(
        ["ssh-keygen", "-L", "-f", str(path)], capture_output=True, text=True, check=True, env=utc
    )
    text = shown.stdout
    assert "Type: ssh-ed25519-cert-v01@openssh.com user certificate" in text
    assert 'Key ID: "sup:kim:4242"' in text and "Serial: 4242" in text
    assert "Valid: from 2026-11-27T11:55:00 to 2026-11-28T00:00:00" in text.replace(" UTC", "")
    principals = text.split("Principals:")[1].split("Critical Options:")[0].split()
    assert principals == ["kim"]
    assert text.split("Critical Options:")[1].split("Extensions:")[0].strip() == "(none)"
    assert text.split("Extensions:")[1].split() == ["permit-port-forwarding", "permit-pty"]

    certificate = load_ssh_public_identity(made.line.encode())
    assert isinstance(certificate, SSHCertificate)
    certificate.verify_cert_signature()  # raises if the signature does not hold
    assert made.valid_after == NOW - sshcerts.BACKDATE and made.valid_before == NOW + timedelta(hours=12)


def test_the_signing_ca_is_the_one_openssh_names(tmp_path: Path) -> None:
    ca = ed25519.Ed25519PrivateKey.generate()
    ca_file = tmp_path / "ca.pub"
    ca_file.write_text(sshcerts.public_line(ca, "sup-ssh-ca") + "\n")
    expected = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(ca_file)], capture_output=True, text=True, check=True
    )
    cert = tmp_path / "id-cert.pub"
    cert.write_text(_sign(ca, ed25519_key("kim@laptop")).line + "\n")
    shown = subprocess.run(["ssh-keygen", "-L", "-f", str(cert)], capture_output=True, text=True, check=True)
    assert expected.stdout.split()[1] in shown.stdout  # "Signing CA: ED25519 SHA256:..." is this CA


def test_a_ca_key_that_cannot_sign_is_refused_without_quoting_it(tmp_path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-f", str(tmp_path / "ca")], check=True
    )
    with pytest.raises(sshcerts.UnusableCaKey, match="unencrypted OpenSSH private key"):
        sshcerts.load_ca_key((tmp_path / "ca").read_bytes())
    garbage = b"-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LXN0dWZm\n-----END OPENSSH PRIVATE KEY-----\n"
    with pytest.raises(sshcerts.UnusableCaKey) as refused:
        sshcerts.load_ca_key(garbage)
    assert "c2VjcmV0" not in str(refused.value)


def test_a_key_openssh_certificates_cannot_carry_is_refused(tmp_path: Path) -> None:
    ca = ed25519.Ed25519PrivateKey.generate()
    subprocess.run(["ssh-keygen", "-q", "-t", "dsa", "-N", "", "-f", str(tmp_path / "dsa")], check=True)
    for line in ((tmp_path / "dsa.pub").read_text().strip(), "sk-ssh-ed25519@openssh.com AAAA garbage"):
        with pytest.raises(sshcerts.UncertifiableKey, match="ed25519, ECDSA and RSA"):
            _sign(ca, line)


def test_an_unusable_ca_key_file_is_a_configuration_error_naming_the_setting(tmp_path: Path) -> None:
    """What `sup serve` says at startup (create_app builds the CA): the path, never the contents."""
    with pytest.raises(ConfigurationError, match=r"ssh_ca.key_file .*nowhere: No such file"):
        SshCa(SshCaSettings(key_file=str(tmp_path / "nowhere")))
    public_only = tmp_path / "ca.pub"
    public_only.write_text(ed25519_key("not-a-private-key") + "\n")
    with pytest.raises(ConfigurationError, match="unencrypted OpenSSH private key") as refused:
        SshCa(SshCaSettings(key_file=str(public_only)))
    assert "AAAA" not in str(refused.value)


def test_the_planner_step_hands_the_trusted_cas_to_the_login_pods(tmp_path: Path) -> None:
    """The SSH CA's step (sup/ssh_ca/step.py, registered in sup/reconcile/steps.py) puts the CA keys
    to trust, the signing one first, into the desired state the Kubernetes target renders; it runs
    only with ssh_ca on and the Kubernetes target in the pass."""
    keygen(tmp_path / "ca", "sup-ca")
    old = ed25519_key("the previous ca")
    settings = Settings(ssh_ca={"key_file": str(tmp_path / "ca"), "also_trusted": [old]})
    assert SSH_CA_STEP in STEPS
    assert SSH_CA_STEP.runs(settings, ["kube"]) and not SSH_CA_STEP.runs(settings, ["ldap", "slurm"])
    assert not SSH_CA_STEP.runs(Settings(), ["kube"])
    adjusted = SSH_CA_STEP.adjust(None, settings, DesiredState())  # type: ignore[arg-type]  # reads no store
    signing = (tmp_path / "ca.pub").read_text().split()[:2]
    assert [line.split()[:2] for line in adjusted.ssh_user_ca_keys] == [signing, old.split()[:2]]
