"""SSH public keys for tests, made with `cryptography` (no ssh-keygen needed on the machine)."""

from __future__ import annotations

import base64
import os
import struct

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

_OPENSSH = (serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)


def ed25519_key(comment: str = "") -> str:
    line = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(*_OPENSSH).decode()
    return f"{line} {comment}".rstrip()


def ecdsa_key(curve: ec.EllipticCurve, comment: str = "") -> str:
    line = ec.generate_private_key(curve).public_key().public_bytes(*_OPENSSH).decode()
    return f"{line} {comment}".rstrip()


def rsa_key(bits: int, comment: str = "") -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    line = key.public_key().public_bytes(*_OPENSSH).decode()
    return f"{line} {comment}".rstrip()


def _s(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def sk_ed25519_key(comment: str = "") -> str:
    """A FIDO key as `ssh-keygen -t ed25519-sk` writes it: type, 32-byte key, application."""
    kind = b"sk-ssh-ed25519@openssh.com"
    public = (
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )
    blob = _s(kind) + _s(public) + _s(b"ssh:")
    return f"{kind.decode()} {base64.b64encode(blob).decode()} {comment}".rstrip()


def sk_ecdsa_key(comment: str = "") -> str:
    kind = b"sk-ecdsa-sha2-nistp256@openssh.com"
    point = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    )
    blob = _s(kind) + _s(b"nistp256") + _s(point) + _s(b"ssh:")
    return f"{kind.decode()} {base64.b64encode(blob).decode()} {comment}".rstrip()


def blob_of(line: str) -> bytes:
    return base64.b64decode(line.split()[1])


def with_blob(kind: str, blob: bytes) -> str:
    return f"{kind} {base64.b64encode(blob).decode()}"


def random_bytes(n: int) -> bytes:
    return os.urandom(n)
