"""Self-service: a person with their own OIDC access token reads their provisioning status,
manages their own SSH public keys and gets SSH certificates (when `oidc.self_service` is on).

Which account a token reaches is `oidc.accounts`' call (sup/me/accounts.py): per source, the claim
that carries the `external_id` of that source's accounts. By default only the Keycloak pull's users,
by `sub` (the pull stamps `source = "keycloak"` and Keycloak's user id, the `sub` of that realm's
tokens, on the users it creates or takes over); a site adds a SCIM connection (`scim:NAME`) whose
identity provider is also the token issuer, with the claim that holds the id it pushes as
externalId. Nothing else, not a username or email claim, ties a token to an account; users of
sources not named there (the admin API, imports, other connections) are never matched, since their
`external_id` is whatever that source chose. A token that matches accounts of two sources gets 409:
SUP does not pick one.

Keys the person adds have origin `self`; keys from the identity provider (origin `idp`) and those
an administrator set (`admin`) are listed but can only be changed where they come from. Every kind
reaches LDAP. A key that is already another account's is refused without naming that account.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from sup.api import API_PREFIX
from sup.api.context import bearer_scheme, oidc_identity, unauthorized
from sup.common.schemas import Body
from sup.config import Settings
from sup.domain.fields import SshKeyLine
from sup.domain.sshkeys import parse_ssh_public_key
from sup.errors import NotFound
from sup.me.accounts import account_of
from sup.ssh_ca.router import ssh_ca
from sup.store.audit import Actor
from sup.store.models import User
from sup.users.schemas import UserPatch
from sup.users.service import update_user
from sup.users.status import UserStatus, status_of

router = APIRouter(prefix=f"{API_PREFIX}/me", tags=["self-service"])
SELF = "self"


@dataclass(frozen=True)
class Person:
    """Who is asking: the verified claims of their token (which account they are is looked up per
    request, by `oidc.accounts`) and the audit actor `self:NAME`."""

    settings: Settings
    request: Request
    claims: Mapping[str, Any]
    accounts: Mapping[str, str]  # oidc.accounts
    actor: Actor


def _person(
    request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer_scheme)
) -> Person:
    settings: Settings = request.app.state.settings
    if settings.oidc is None or not settings.oidc.self_service:
        raise HTTPException(404, "self-service is not enabled on this site (oidc.self_service)")
    if credentials is None:
        raise unauthorized("your OIDC access token is required (Authorization: Bearer ...)")
    identity = oidc_identity(request, credentials.credentials)
    if identity is None:
        raise unauthorized("self-service takes an OIDC access token from the site's identity provider")
    actor = Actor(
        name=f"self:{identity.username}", role="self", request_id=getattr(request.state, "request_id", None)
    )
    return Person(
        settings=settings,
        request=request,
        claims=identity.claims,
        accounts=settings.oidc.accounts,
        actor=actor,
    )


Me = Annotated[Person, Depends(_person)]


class KeyOut(BaseModel):
    fingerprint: str
    key: str
    origin: str = Field(description="self (yours, managed here), idp (from the identity provider), admin")


class MeOut(BaseModel):
    username: str
    uid_number: int
    primary_gid: int
    email: str | None
    display_name: str | None
    login_shell: str
    home_directory: str
    active: bool
    groups: list[str]
    ssh_keys: list[KeyOut]
    status: UserStatus


class KeyIn(Body):
    key: SshKeyLine = Field(description="one OpenSSH public key line")


def _user(session: Session, person: Person) -> User:
    return account_of(session, person.accounts, person.claims)


def _keys(user: User) -> list[KeyOut]:
    return [KeyOut(fingerprint=k.fingerprint, key=k.line, origin=k.origin) for k in user.ssh_keys]


def _sessions(person: Person) -> Any:
    return person.request.app.state.sessions


@router.get("", response_model=MeOut, summary="Your account and its provisioning status")
def get_me(person: Me) -> MeOut:
    with _sessions(person).begin() as session:
        user = _user(session, person)
        return MeOut(
            username=user.username,
            uid_number=user.uid_number,
            primary_gid=user.primary_gid,
            email=user.email,
            display_name=user.display_name,
            login_shell=user.login_shell,
            home_directory=user.home_directory,
            active=user.active,
            groups=sorted(m.group.name for m in user.memberships),
            ssh_keys=_keys(user),
            status=status_of(session, person.settings, user.username),
        )


class CertificateIn(Body):
    public_key: SshKeyLine = Field(
        description="the OpenSSH public key to certify (its private key stays with you)"
    )
    validity_hours: int | None = Field(
        None, description="shorter than the site's ssh_ca.validity_hours if you like; default: that"
    )


class CertificateOut(BaseModel):
    certificate: str = Field(description="the OpenSSH certificate line: save it as KEY-cert.pub beside KEY")
    principal: str = Field(description="the username the certificate logs in as")
    serial: str
    key_id: str
    valid_after: datetime
    valid_before: datetime


@router.post(
    "/ssh-certificate",
    status_code=201,
    response_model=CertificateOut,
    summary="A short-lived SSH certificate for one of your public keys",
)
def sign_certificate(person: Me, body: CertificateIn) -> CertificateOut:
    """SUP signs the key as an OpenSSH user certificate for your username (docs/ssh-certificates.md):
    403 while your account is suspended, 404 when this site issues none."""
    ca = ssh_ca(person.request)
    with _sessions(person).begin() as session:
        user = _user(session, person)
        made = ca.certify(session, person.actor, user, body.public_key, body.validity_hours)
    return CertificateOut(
        certificate=made.line,
        principal=made.principal,
        serial=str(made.serial),
        key_id=made.key_id,
        valid_after=made.valid_after,
        valid_before=made.valid_before,
    )


@router.get("/ssh-keys", response_model=list[KeyOut], summary="Your SSH public keys, every origin")
def list_keys(person: Me) -> list[KeyOut]:
    with _sessions(person).begin() as session:
        return _keys(_user(session, person))


@router.post("/ssh-keys", status_code=201, response_model=KeyOut, summary="Add one of your own SSH keys")
def add_key(person: Me, body: KeyIn) -> KeyOut:
    parsed = parse_ssh_public_key(body.key)
    with _sessions(person).begin() as session:
        user = _user(session, person)
        existing = next((k for k in user.ssh_keys if k.fingerprint == parsed.fingerprint), None)
        if existing is not None:
            return KeyOut(fingerprint=existing.fingerprint, key=existing.line, origin=existing.origin)
        own = [k.line for k in user.ssh_keys if k.origin == SELF] + [body.key]
        patch = UserPatch(ssh_public_keys=own)
        update_user(
            session,
            person.settings,
            person.actor,
            user.username,
            patch,
            key_origin=SELF,
            keys_of_origin_only=True,
        )
        added = next(k for k in user.ssh_keys if k.fingerprint == parsed.fingerprint)
        return KeyOut(fingerprint=added.fingerprint, key=added.line, origin=added.origin)


@router.delete("/ssh-keys/{fingerprint:path}", status_code=204, summary="Remove one of your own SSH keys")
def delete_key(person: Me, fingerprint: str) -> Response:
    with _sessions(person).begin() as session:
        user = _user(session, person)
        key = next((k for k in user.ssh_keys if k.fingerprint == fingerprint), None)
        if key is None:
            raise NotFound("ssh key", fingerprint)
        if key.origin != SELF:
            where = "the identity provider" if key.origin == "idp" else "an administrator"
            raise HTTPException(403, f"this key comes from {where}; change it there")
        own = [k.line for k in user.ssh_keys if k.origin == SELF and k.fingerprint != fingerprint]
        update_user(
            session,
            person.settings,
            person.actor,
            user.username,
            UserPatch(ssh_public_keys=own),
            key_origin=SELF,
            keys_of_origin_only=True,
        )
    return Response(status_code=204)
