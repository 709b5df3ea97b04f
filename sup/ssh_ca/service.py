"""Signing people's SSH keys: the CA's key, who may get a certificate, and the audit trail.

Only an active person gets a certificate, for their own username and no other, for at most
`ssh_ca.validity_hours`. Every certificate is recorded in the audit log (action `sign_certificate`
on the user) with its serial, key id, the key's fingerprint, the public key itself and its validity:
what a site needs to find, and revoke, a certificate later. The certificate itself is not stored: it
is public, and it is worth nothing without the private key that stays on the person's machine.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from sup.config.ssh_ca import MAX_VALIDITY_HOURS, SshCaSettings
from sup.domain import sshcerts
from sup.domain.revocation import revoked_keys, signed_key, valid_before_of
from sup.domain.sshkeys import InvalidSshKey, parse_ssh_public_key
from sup.errors import ConfigurationError, Conflict, FieldError, Forbidden, InvalidInput
from sup.store.audit import Actor, entries_since, record
from sup.store.models import SshKey, User, utcnow

CA_COMMENT = "sup-ssh-ca"


class SshCa:
    """The CA: its key (read once, at startup) and the public keys login pods and the gateway trust."""

    def __init__(self, settings: SshCaSettings) -> None:
        self.settings = settings
        try:
            data = Path(settings.key_file).read_bytes()
        except OSError as exc:
            raise ConfigurationError(f"ssh_ca.key_file {settings.key_file}: {exc.strerror}") from None
        try:
            self.key = sshcerts.load_ca_key(data)
        except sshcerts.UnusableCaKey as exc:
            raise ConfigurationError(f"ssh_ca.key_file {settings.key_file}: {exc}") from None

    @property
    def trusted(self) -> list[str]:
        """The CA public keys to trust, the signing one first (TrustedUserCAKeys lines)."""
        return [sshcerts.public_line(self.key, CA_COMMENT), *self.settings.also_trusted]

    @property
    def fingerprints(self) -> list[str]:
        """The SHA256 fingerprints of `trusted`, as the gateway compares a certificate's CA."""
        return [parse_ssh_public_key(line).fingerprint for line in self.trusted]

    def certify(
        self, session: Session, actor: Actor, user: User, public_key: str, hours: int | None = None
    ) -> sshcerts.Certificate:
        """A certificate for `user`'s `public_key`, recorded in the audit log; Forbidden for a person
        who is suspended, InvalidInput for a key SUP cannot certify or a validity over the limit."""
        if not user.active:
            raise Forbidden("your account is suspended: no certificate is issued")
        limit = self.settings.validity_hours
        if hours is not None and not 1 <= hours <= limit:
            raise InvalidInput(
                FieldError("validity_hours", f"must be from 1 to {limit} (ssh_ca.validity_hours)")
            )
        try:
            parsed = parse_ssh_public_key(public_key)
        except InvalidSshKey as exc:
            raise InvalidInput(FieldError("public_key", str(exc))) from None
        owner = session.scalars(
            select(SshKey.user_id).where(SshKey.fingerprint == parsed.fingerprint)
        ).first()
        if owner is not None and owner != user.id:
            # As for plain keys: never say whose it is.
            raise Conflict("this key belongs to another account; use a key of your own", field="public_key")
        serial = secrets.randbits(63)
        try:
            certificate = sshcerts.sign_user_certificate(
                self.key,
                parsed.line,
                principal=user.username,
                serial=serial,
                key_id=f"sup:{user.username}:{serial}",
                now=utcnow(),
                lifetime=timedelta(hours=hours or limit),
                extensions=list(self.settings.extensions),
            )
        except sshcerts.UncertifiableKey as exc:
            raise InvalidInput(FieldError("public_key", str(exc))) from None
        record(
            session,
            actor,
            "sign_certificate",
            "user",
            user.username,
            after={
                "serial": str(serial),  # 63 bits: a string, so that JSON readers keep every digit
                "key_id": certificate.key_id,
                "fingerprint": parsed.fingerprint,
                # The key without its comment: what the revocation list names (sup/domain/revocation.py).
                "public_key": f"{parsed.key_type} {parsed.blob}",
                "principal": certificate.principal,
                "valid_after": certificate.valid_after.isoformat(),
                "valid_before": certificate.valid_before.isoformat(),
                "extensions": sorted(self.settings.extensions),
            },
        )
        return certificate


def revoked_public_keys(session: Session, now: datetime) -> list[str]:
    """The keys of the certificates SUP signed that are still valid at `now` and whose person is
    suspended or removed (sup/domain/revocation.py). Reads only the signings of the last
    MAX_VALIDITY_HOURS (none older can still be valid) and the people they name in one query."""
    entries = entries_since(session, "sign_certificate", now - timedelta(hours=MAX_VALIDITY_HOURS))
    signed = [
        key
        for entry in entries
        if entry.resource_type == "user" and (key := signed_key(entry.resource_name, entry.after))
    ]
    return revoked_keys(signed, _active_by_name(session, {key.username for key in signed}), now)


def _active_by_name(session: Session, usernames: set[str]) -> dict[str, bool]:
    """Whether each of these people is active; a username missing from the answer: no such person."""
    if not usernames:
        return {}
    query = select(User.username, User.active).where(User.username.in_(usernames))
    return {row.username: row.active for row in session.execute(query)}


def names_on_live_certificates(
    session: Session, usernames: Collection[str], now: datetime
) -> dict[str, datetime]:
    """Of `usernames`, those that are the principal of a certificate SUP signed that is still valid
    at `now`, each with when the last of them expires.

    A certificate names its person by username only, and every sshd that trusts the CA (the gateway,
    a login pod, a site's own) admits it as whoever holds that username then. So a username whose
    holder was removed or renamed may not be given to somebody else until these have expired
    (sup/users/service.py asks before it does): otherwise the previous holder's certificate would
    log in as the new person. Reads only these names' signings of the last MAX_VALIDITY_HOURS,
    through the audit log's index on the resource (a create is not a scan of a day's signings)."""
    since = now - timedelta(hours=MAX_VALIDITY_HOURS)
    live: dict[str, datetime] = {}
    for entry in entries_since(session, "sign_certificate", since, users=usernames):
        until = valid_before_of(entry.after)
        if until is not None and until > now:
            live[entry.resource_name] = max(until, live.get(entry.resource_name, until))
    return live


def name_still_certified(username: str, until: datetime) -> str:
    """Why `username` cannot be given to a new holder yet (names_on_live_certificates)."""
    return (
        f"the username {username!r} is on an SSH certificate SUP signed for its previous holder, valid "
        f"until {until:%Y-%m-%d %H:%M} UTC; it cannot be given to anyone else before then"
    )
