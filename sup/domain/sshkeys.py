"""SSH public keys: parse, validate and fingerprint one authorized_keys-style line.

What reaches LDAP's sshPublicKey ends up in every node's AuthorizedKeysCommand output, so only
plain keys of the types OpenSSH still accepts by default are let through: ed25519, ECDSA on the NIST
curves, RSA of 2048 bits or more, and the FIDO (`sk-`) variants. The wire blob is decoded and checked
by the `cryptography` library (curve points, RSA modulus), not by pattern matching.

The line holds no control character: a TAB (a field separator for OpenSSH, and harmless in a comment)
becomes a space, any other control character (C0, DEL, C1) or line/paragraph separator is refused.
LDAP refuses such a value, and with it the user's whole entry, so none may reach the store.
Nor may any other character that `str.isprintable()` calls unprintable: format characters (bidi
overrides and isolates such as U+202E, zero-width spaces and joiners, U+FEFF), spaces other than the
ASCII one (U+00A0, U+3000), private-use and unassigned code points. A login pod's authorized_keys
file (sup/targets/kube/login_files.py) leaves out a key whose line is not printable (`printable`),
while the SSH gateway matches keys by fingerprint alone: refusing such a key where it enters keeps
the two agreeing on what a person may log in with, and keeps text that displays as something else
out of files an administrator reads.

A person's keys together are capped too (`key_set_problem`: `accounts.max_ssh_keys` keys and
`accounts.max_ssh_key_bytes` bytes): they all go into every login pod the person may use, and a group
pod's ConfigMap holds at most 1 MiB for all its members.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key

MIN_RSA_BITS = 2048
MAX_KEY_LINE = 16 * 1024
MAX_COMMENT = 1024

ACCEPTED_TYPES: tuple[str, ...] = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)


class InvalidSshKey(ValueError):
    """The text is not an acceptable SSH public key; the message says what is wrong."""


@dataclass(frozen=True)
class SshPublicKey:
    key_type: str
    blob: str  # base64, exactly as OpenSSH writes it
    comment: str
    bits: int | None  # RSA modulus size, None for the fixed-size types
    fingerprint: str  # "SHA256:...", as `ssh-keygen -l` prints it

    @property
    def line(self) -> str:
        """The normalised authorized_keys line: type, blob and (if any) comment, single-spaced."""
        return f"{self.key_type} {self.blob} {self.comment}".rstrip()


def _inner_type(blob: bytes) -> str:
    """The key-type string at the start of the wire blob (RFC 4253 section 6.6)."""
    if len(blob) < 4:
        raise InvalidSshKey("key data is too short to be an SSH key")
    (length,) = struct.unpack(">I", blob[:4])
    if length > 64 or len(blob) < 4 + length:
        raise InvalidSshKey("key data does not start with a key type")
    try:
        return blob[4 : 4 + length].decode("ascii")
    except UnicodeDecodeError as exc:
        raise InvalidSshKey("key data does not start with a key type") from exc


def _is_control(char: str) -> bool:
    """A control character other than TAB, or a Unicode line or paragraph separator."""
    return char != "\t" and (unicodedata.category(char) in ("Cc", "Zl", "Zp"))


def printable(line: str) -> bool:
    """Whether a login pod writes this key line: every character of it printable
    (`str.isprintable`). `parse_ssh_public_key` refuses any other line, so only a key stored before
    that rule can fail this."""
    return line.isprintable()


def _unprintable(line: str) -> str | None:
    """The first character of `line` (TABs already spaces) that a login pod would not write."""
    return next((c for c in line if not c.isprintable()), None)


def key_set_bytes(lines: Iterable[str]) -> int:
    """What a person's keys take in an authorized_keys file (a login pod's ConfigMap, LDAP's
    sshPublicKey values): each line in UTF-8 and its newline."""
    return sum(len(line.encode()) + 1 for line in lines)


def key_set_problem(lines: Iterable[str], max_keys: int, max_bytes: int) -> str | None:
    """Why one person may not hold these keys (normalised lines, as `SshPublicKey.line`), or None."""
    lines = list(lines)
    if len(lines) > max_keys:
        return f"{len(lines)} keys; at most {max_keys} per person (accounts.max_ssh_keys)"
    size = key_set_bytes(lines)
    if size > max_bytes:
        return f"the keys take {size} bytes; at most {max_bytes} per person (accounts.max_ssh_key_bytes)"
    return None


def fingerprint(blob: bytes) -> str:
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")
    return f"SHA256:{digest}"


def parse_ssh_public_key(text: str) -> SshPublicKey:
    """Parse one public key line such as `ssh-ed25519 AAAAC3... kim@laptop`."""
    if not isinstance(text, str):
        raise InvalidSshKey("an SSH public key must be a string")
    return _parse(text)


# A bulk import meets each key three times (schema, plan, write): parsing is most of its CPU time.
@lru_cache(maxsize=16384)
def _parse(text: str) -> SshPublicKey:
    if len(text) > MAX_KEY_LINE:
        raise InvalidSshKey(f"key is {len(text)} characters long; at most {MAX_KEY_LINE} are allowed")
    line = text.strip()
    if not line:
        raise InvalidSshKey("key is empty")
    if any(_is_control(c) for c in line):
        raise InvalidSshKey("key contains control characters (one key per entry, no line breaks)")
    line = line.replace("\t", " ")
    odd = _unprintable(line)
    if odd is not None:
        raise InvalidSshKey(
            f"key contains the invisible or formatting character U+{ord(odd):04X} "
            f"({unicodedata.name(odd, 'unnamed')}); login pods leave such a key out, so it is "
            "refused: remove it (comments may hold letters, digits, symbols and plain spaces)"
        )
    parts = line.split(None, 2)
    key_type = parts[0]
    if key_type.startswith("-----BEGIN") or key_type == "----":
        raise InvalidSshKey("this is a PEM or private key block; give the one-line public key (*.pub)")
    if key_type not in ACCEPTED_TYPES:
        if key_type == "ssh-dss":
            raise InvalidSshKey("DSA keys (ssh-dss) are disabled in OpenSSH; use ed25519")
        if "-cert-v01@openssh.com" in key_type:
            raise InvalidSshKey("SSH certificates are not accepted; give the plain public key")
        if "=" in key_type or "," in key_type or any(t in ACCEPTED_TYPES for t in parts[1:2]):
            raise InvalidSshKey(
                "authorized_keys options (from=, command=, ...) are not accepted; give the key alone"
            )
        raise InvalidSshKey(
            f"unknown key type {key_type[:40]!r}; accepted types: {', '.join(ACCEPTED_TYPES)}"
        )
    if len(parts) < 2:
        raise InvalidSshKey(f"{key_type} key has no key data")
    b64 = parts[1]
    comment = parts[2].strip() if len(parts) > 2 else ""
    if len(comment) > MAX_COMMENT:
        raise InvalidSshKey(f"key comment is longer than {MAX_COMMENT} characters")
    try:
        blob = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidSshKey(f"{key_type} key data is not valid base64") from exc
    inner = _inner_type(blob)
    if inner != key_type:
        raise InvalidSshKey(f"key says it is {key_type} but its data is a {inner[:40]!r} key")
    try:
        key = load_ssh_public_key(f"{key_type} {b64}".encode("ascii"))
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise InvalidSshKey(f"{key_type} key data is malformed or truncated") from exc
    bits: int | None = None
    if isinstance(key, rsa.RSAPublicKey):
        bits = key.key_size
        if bits < MIN_RSA_BITS:
            raise InvalidSshKey(f"RSA key has {bits} bits; at least {MIN_RSA_BITS} are required")
    canonical = base64.b64encode(blob).decode("ascii")
    return SshPublicKey(key_type, canonical, comment, bits, fingerprint(blob))
