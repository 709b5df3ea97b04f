"""OpenSSH user certificates (PROTOCOL.certkeys): what SUP signs as the cluster's SSH CA. Pure: keys
in, certificate lines out; loading the CA's key and recording what was signed are the service's.

A certificate names one principal (the person's username), a validity window, the extensions the
site permits and no critical options. sshd accepts it for a login as that principal when the CA's
public key is in its TrustedUserCAKeys, and (with AuthorizedPrincipalsFile) when the principal is
listed for the account.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    SSHCertificateBuilder,
    SSHCertificateType,
    load_ssh_private_key,
    load_ssh_public_key,
)

CaKey = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
BACKDATE = timedelta(minutes=5)
"""valid_after lies this far back: a node whose clock is a little behind SUP's still accepts a
certificate made a moment ago."""


class UnusableCaKey(ValueError):
    """The CA key file cannot sign (not an OpenSSH private key, encrypted, or of a type that cannot)."""


class UncertifiableKey(ValueError):
    """The public key cannot be put in a certificate (a type OpenSSH certificates do not carry)."""


@dataclass(frozen=True)
class Certificate:
    line: str  # `ssh-ed25519-cert-v01@openssh.com AAAA... KEY_ID`: what goes in id_ed25519-cert.pub
    serial: int
    key_id: str
    principal: str
    valid_after: datetime
    valid_before: datetime


def load_ca_key(data: bytes) -> CaKey:
    """The CA's private key from an OpenSSH private key file's bytes (no passphrase)."""
    try:
        key = load_ssh_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        # Never the text of the error: it may quote the file.
        raise UnusableCaKey(f"not an unencrypted OpenSSH private key ({type(exc).__name__})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise UnusableCaKey(f"a {type(key).__name__} cannot sign OpenSSH certificates")
    return key


def public_line(key: CaKey, comment: str = "") -> str:
    """The CA's public key as an OpenSSH line, for TrustedUserCAKeys."""
    line = key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    return f"{line} {comment}".strip()


def sign_user_certificate(
    ca: CaKey,
    public_key: str,
    *,
    principal: str,
    serial: int,
    key_id: str,
    now: datetime,
    lifetime: timedelta,
    extensions: list[str],
) -> Certificate:
    """Certify `public_key` (an OpenSSH public key line) for `principal` from now - BACKDATE until
    now + lifetime."""
    try:
        # DSA is refused before loading: cryptography warns that it will drop it.
        dsa = public_key.startswith("ssh-dss ")
        subject = None if dsa else load_ssh_public_key(public_key.encode())
    except (ValueError, UnsupportedAlgorithm):
        subject = None  # e.g. a security key (sk-...), which cryptography does not load
    if not isinstance(subject, ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey | rsa.RSAPublicKey):
        raise UncertifiableKey("SUP can certify ed25519, ECDSA and RSA keys only")
    valid_after = now - BACKDATE
    valid_before = now + lifetime
    builder = (
        SSHCertificateBuilder()
        .public_key(subject)
        .serial(serial)
        .type(SSHCertificateType.USER)
        .key_id(key_id.encode())
        .valid_principals([principal.encode()])
        .valid_after(int(valid_after.timestamp()))
        .valid_before(int(valid_before.timestamp()))
    )
    for name in sorted(extensions):  # PROTOCOL.certkeys: extensions in lexical order
        builder = builder.add_extension(name.encode(), b"")
    certificate = builder.sign(ca)
    line = f"{certificate.public_bytes().decode()} {key_id}"
    return Certificate(
        line=line,
        serial=serial,
        key_id=key_id,
        principal=principal,
        valid_after=valid_after.replace(microsecond=0),
        valid_before=valid_before.replace(microsecond=0),
    )
