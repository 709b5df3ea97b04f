"""Which signed keys an sshd outside SUP must refuse: the revocation list of
GET /api/v1/ssh-ca/revoked-keys (docs/ssh-certificates.md, "Other sshd servers: the revocation list").

A certificate SUP signed stays valid until its `valid_before` wherever its CA is trusted. Once its
person is suspended or removed, an sshd SUP does not run can refuse it only by its key: OpenSSH's
`RevokedKeys` file, as plain public key lines, revokes each listed key and every certificate of it.
The list holds the keys of the certificates that have not expired yet and whose person is no longer
active. Pure: the caller reads the audit entries and the people.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class SignedKey:
    """One certificate SUP signed, as its audit entry tells: whose, which key, until when."""

    username: str
    public_key: str  # `ssh-ed25519 AAAA...`, no comment
    valid_before: datetime


def signed_key(username: str, after: Mapping[str, Any] | None) -> SignedKey | None:
    """The certificate a `sign_certificate` audit entry records, or None when the entry cannot say
    which key it certified (entries written before SUP recorded `public_key`) or is malformed."""
    key = (after or {}).get("public_key")
    valid_before = valid_before_of(after)
    if not isinstance(key, str) or valid_before is None or len(key.split()) != 2:
        return None
    return SignedKey(username, key, valid_before)


def valid_before_of(after: Mapping[str, Any] | None) -> datetime | None:
    """When the certificate a `sign_certificate` entry records expires; None when the entry does
    not say in a form that can be compared with now (SUP writes aware ISO times)."""
    until = (after or {}).get("valid_before")
    if not isinstance(until, str):
        return None
    try:
        valid_before = datetime.fromisoformat(until)
    except ValueError:
        return None
    return valid_before if valid_before.tzinfo is not None else None


def revoked_keys(signed: Iterable[SignedKey], active: Mapping[str, bool], now: datetime) -> list[str]:
    """The keys to refuse, sorted and each once: those of certificates still valid at `now` whose
    person is suspended (`active[username]` false) or removed (not in `active` at all)."""
    return sorted(
        {key.public_key for key in signed if key.valid_before > now and not active.get(key.username, False)}
    )


def revoked_keys_file(keys: list[str], generated: datetime) -> str:
    """The list as sshd's `RevokedKeys` reads it: a `#` comment line (sshd skips it), then one key a
    line."""
    stamp = generated.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    header = f"# SUP revoked keys, generated {stamp}; {len(keys)} keys\n"
    return header + "".join(f"{key}\n" for key in keys)
