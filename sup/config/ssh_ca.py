"""SUP as the cluster's SSH certificate authority (settings key `ssh_ca`; docs/ssh-certificates.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from sup.common.sections import Section
from sup.domain.sshkeys import InvalidSshKey, parse_ssh_public_key

Extension = Literal[
    "permit-pty",
    "permit-port-forwarding",
    "permit-agent-forwarding",
    "permit-X11-forwarding",
    "permit-user-rc",
]
MAX_VALIDITY_HOURS = 24


def _default_extensions() -> list[Extension]:
    return ["permit-port-forwarding", "permit-pty"]


class SshCaSettings(Section):
    """SUP signs people's SSH public keys as short-lived OpenSSH user certificates (principal: their
    username), asked for with their own OIDC access token at /api/v1/me/ssh-certificate; absent, it
    signs nothing.

    The CA's private key is a file only SUP reads (in Kubernetes: a Secret mounted into SUP's pod,
    never into a login pod); its public key, and those in `also_trusted`, are what the login pods and
    the gateway trust.
    """

    key_file: str = Field(
        description="the CA's private key, an OpenSSH private key file without a passphrase (ed25519 "
        "recommended: `ssh-keygen -t ed25519 -N '' -f ca`)",
        examples=["/etc/sup/ssh-ca/ca"],
    )
    also_trusted: list[str] = Field(
        default_factory=list,
        description="public keys (OpenSSH lines) of other CAs whose certificates stay trusted: the old CA "
        "during a rotation; SUP never signs with them",
    )
    validity_hours: int = Field(
        12,
        ge=1,
        le=MAX_VALIDITY_HOURS,
        description="how long a certificate is valid (a person may ask for less); at most 24",
    )
    login_client_id: str | None = Field(
        None,
        description="the identity provider's public client `sup ssh login` signs people in with (the "
        "OAuth device grant on, its tokens' aud naming oidc.audience); null: no such login offered",
        examples=["sup-ssh"],
    )
    plain_keys: bool = Field(
        True,
        description="false: certificates only, at the gateway and in the login pods (users' and "
        "groups'): neither takes the public keys people uploaded, which still go to LDAP "
        '(docs/ssh-certificates.md, "Certificates only")',
    )
    extensions: list[Extension] = Field(
        default_factory=_default_extensions,
        description="what a certificate permits (OpenSSH extensions); the login pods' sshd settings "
        "still apply on top (kube.ssh_tcp_forwarding, kube.ssh_agent_forwarding)",
    )

    @field_validator("also_trusted")
    @classmethod
    def _public_keys(cls, value: list[str]) -> list[str]:
        for number, line in enumerate(value):
            try:
                parse_ssh_public_key(line)
            except InvalidSshKey as exc:
                raise ValueError(f"also_trusted[{number}]: {exc}") from None
        return [line.strip() for line in value]

    @field_validator("extensions")
    @classmethod
    def _no_repeats(cls, value: list[Extension]) -> list[Extension]:
        return sorted(set(value))


def plain_keys_taken(ca: SshCaSettings | None) -> bool:
    """Whether the gateway and the login pods take people's uploaded public keys: always without a
    CA (they are the only way in then), else as `ssh_ca.plain_keys` says."""
    return ca is None or ca.plain_keys
