"""GET /api/v1/ssh-ca: the CA public keys a login pod's sshd and the gateway trust (no token: they are
public, and a node or an operator's script needs them before it holds any credential); and
GET /api/v1/ssh-ca/revoked-keys, the revocation list for sshd servers SUP does not run (no token
either, for the same reasons)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from importlib.resources import files

from fastapi import APIRouter, HTTPException, Request, Response
from pydantic import BaseModel, Field

from sup.api import API_PREFIX
from sup.config import Settings
from sup.domain.revocation import revoked_keys_file
from sup.ssh_ca.service import SshCa, revoked_public_keys
from sup.store.models import utcnow

router = APIRouter(prefix=f"{API_PREFIX}/ssh-ca", tags=["ssh certificates"])
REVOKED_CACHE_SECONDS = 5.0
"""How long one answer of the revocation list is served again: the bound it adds to a revocation."""


class ReusedAnswer:
    """The last answer of an endpoint anyone may call, for REVOKED_CACHE_SECONDS: however many hosts
    fetch the revocation list (or a flood of requests without a token), SUP reads the day's signings
    at most once an interval. One request computes while the others wait for its answer."""

    def __init__(self, seconds: Callable[[], float] = lambda: REVOKED_CACHE_SECONDS) -> None:
        self._seconds = seconds
        self._lock = threading.Lock()
        self._made = 0.0
        self._answer: tuple[str, str] | None = None

    def get(self, compute: Callable[[], tuple[str, str]]) -> tuple[str, str]:
        with self._lock:
            if self._answer is None or time.monotonic() - self._made >= self._seconds():
                self._answer = compute()
                self._made = time.monotonic()
            return self._answer


_answers_lock = threading.Lock()


def _reused(request: Request) -> ReusedAnswer:
    """The app's one ReusedAnswer for the list, kept on the app (tests make several apps)."""
    with _answers_lock:
        answer: ReusedAnswer | None = getattr(request.app.state, "revoked_keys_answer", None)
        if answer is None:
            answer = request.app.state.revoked_keys_answer = ReusedAnswer()
        return answer


class LoginOut(BaseModel):
    issuer: str = Field(description="the identity provider (oidc.issuer)")
    client_id: str = Field(description="its client for the device login (ssh_ca.login_client_id)")
    gateway_host: str | None = Field(description="the SSH gateway as people type it (gateway.public_host)")


class CaOut(BaseModel):
    trusted_user_ca_keys: list[str] = Field(
        description="OpenSSH public key lines, the signing CA first: sshd's TrustedUserCAKeys"
    )
    validity_hours: int = Field(description="how long the certificates SUP signs are valid, at most")
    extensions: list[str]
    login: LoginOut | None = Field(
        None, description="what `sup ssh login` needs; null when the site offers no such login"
    )


def ssh_ca(request: Request) -> SshCa:
    """The app's CA, or 404 when this site does not sign certificates."""
    found: SshCa | None = getattr(request.app.state, "ssh_ca", None)
    if found is None:
        raise HTTPException(404, "this site does not issue SSH certificates (no ssh_ca settings)")
    return found


@router.get("", response_model=CaOut, summary="The SSH certificate authority's public keys")
def get_ca(request: Request) -> CaOut:
    ca = ssh_ca(request)
    settings: Settings = request.app.state.settings
    login = None
    if ca.settings.login_client_id and settings.oidc is not None:
        gateway = settings.gateway.public_host if settings.gateway is not None else None
        login = LoginOut(
            issuer=settings.oidc.issuer, client_id=ca.settings.login_client_id, gateway_host=gateway
        )
    return CaOut(
        trusted_user_ca_keys=ca.trusted,
        validity_hours=ca.settings.validity_hours,
        extensions=list(ca.settings.extensions),
        login=login,
    )


@router.get("/client", summary="sup-ssh-login: the one-file login client for researchers")
def get_client(request: Request) -> Response:
    """The researchers' client (sup/ssh_login.py: one file, standard library only), so that they
    fetch it from their own cluster: `curl -o sup-ssh-login https://SUP/api/v1/ssh-ca/client`."""
    ssh_ca(request)
    body = files("sup").joinpath("ssh_login.py").read_bytes()
    headers = {"Content-Disposition": 'attachment; filename="sup-ssh-login"'}
    return Response(body, media_type="text/x-python; charset=utf-8", headers=headers)


@router.get(
    "/revoked-keys",
    summary="The revocation list: keys of unexpired certificates whose person is suspended or removed",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "sshd's RevokedKeys file"}},
)
def get_revoked_keys(request: Request) -> Response:
    """For sshd's `RevokedKeys` on servers SUP does not run (a bastion, a data-transfer node): a
    `#` comment line, then one public key a line, each revoking every certificate of that key. The
    keys of certificates SUP signed that have not expired and whose person is now suspended or no
    longer exists. No token: like the CA keys, these are public keys (no username, no certificate),
    and an sshd's fetch must work without any credential, as a CRL's does; what it tells a stranger
    is that the holder of a key they already know lost access within the last day. Certificates
    signed before SUP recorded their key in the audit log cannot be listed. An answer is served
    again for REVOKED_CACHE_SECONDS (ReusedAnswer), which bounds what fetching it costs SUP."""
    ssh_ca(request)

    def compute() -> tuple[str, str]:
        now = utcnow()
        with request.app.state.sessions.begin() as session:
            keys = revoked_public_keys(session, now)
        return revoked_keys_file(keys, now), hashlib.sha256("\n".join(keys).encode()).hexdigest()[:32]

    body, etag = _reused(request).get(compute)
    headers = {"Cache-Control": "no-cache", "ETag": f'"{etag}"'}
    return Response(body, media_type="text/plain; charset=utf-8", headers=headers)
