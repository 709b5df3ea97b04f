"""A local OIDC issuer for tests: its own signing key, its discovery document and JWKS (served to
OidcVerifier through its `fetch` hook, no HTTP), and tokens shaped as Keycloak's are, which a test
bends one claim or header at a time."""

from __future__ import annotations

import json
import time
from typing import Any

from jwcrypto import jwk, jwt

from sup.api.oidc import OidcVerifier
from sup.config import OidcSettings

ISSUER = "https://id.example.org/realms/hpc"
AUDIENCE = "sup"


class LocalIssuer:
    def __init__(self, issuer: str = ISSUER, jwks_uri: str | None = None) -> None:
        self.issuer = issuer
        self.jwks_uri = jwks_uri or f"{issuer}/protocol/openid-connect/certs"
        self.key = jwk.JWK.generate(kty="EC", crv="P-256", kid="test-key")

    def settings(self, **extra: Any) -> OidcSettings:
        return OidcSettings(issuer=self.issuer, audience=AUDIENCE, **extra)

    def verifier(self, **extra: Any) -> OidcVerifier:
        return OidcVerifier(self.settings(**extra), fetch=self.serve)

    def serve(self, url: str) -> Any:
        """The documents an issuer publishes, by URL."""
        if url == f"{self.issuer}/.well-known/openid-configuration":
            return {"issuer": self.issuer, "jwks_uri": self.jwks_uri}
        if url == self.jwks_uri:
            return {"keys": [json.loads(self.key.export_public())]}
        raise OSError(f"nothing at {url}")

    def claims(self, subject: str = "5b1e-person", **extra: Any) -> dict[str, Any]:
        """A Keycloak access token's claims; `extra` replaces or adds (None removes a claim)."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": AUDIENCE,
            "sub": subject,
            "exp": now + 300,
            "iat": now,
            "typ": "Bearer",
            "preferred_username": "pat",
            "realm_access": {"roles": ["sup-admin"]},
        }
        claims.update(extra)
        return {name: value for name, value in claims.items() if value is not None}

    def token(self, subject: str = "5b1e-person", header: dict[str, Any] | None = None, **claims: Any) -> str:
        signed = jwt.JWT(
            header={"alg": "ES256", "kid": "test-key", "typ": "JWT", **(header or {})},
            claims=self.claims(subject, **claims),
        )
        signed.make_signed_token(self.key)
        return str(signed.serialize())
