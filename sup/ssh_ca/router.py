"""GET /api/v1/ssh-ca: the CA public keys a login pod's sshd and the gateway trust (no token: they are
public, and a node or an operator's script needs them before it holds any credential)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, Field

from sup.api import API_PREFIX
from sup.ssh_ca.service import SshCa

router = APIRouter(prefix=f"{API_PREFIX}/ssh-ca", tags=["ssh certificates"])


class CaOut(BaseModel):
    trusted_user_ca_keys: list[str] = Field(
        description="OpenSSH public key lines, the signing CA first: sshd's TrustedUserCAKeys"
    )
    validity_hours: int = Field(description="how long the certificates SUP signs are valid, at most")
    extensions: list[str]


def ssh_ca(request: Request) -> SshCa:
    """The app's CA, or 404 when this site does not sign certificates."""
    found: SshCa | None = getattr(request.app.state, "ssh_ca", None)
    if found is None:
        raise HTTPException(404, "this site does not issue SSH certificates (no ssh_ca settings)")
    return found


@router.get("", response_model=CaOut, summary="The SSH certificate authority's public keys")
def get_ca(request: Request) -> CaOut:
    ca = ssh_ca(request)
    return CaOut(
        trusted_user_ca_keys=ca.trusted,
        validity_hours=ca.settings.validity_hours,
        extensions=list(ca.settings.extensions),
    )
