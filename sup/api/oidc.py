"""OIDC access tokens (e.g. from a Keycloak realm) as bearer tokens on the admin API.

A token is accepted when its JWS signature verifies against a key of the issuer's JWKS (RS/ES/PS
algorithms only: never `none` or HMAC, which would let anybody who knows a public key sign), its `iss`
is the configured issuer, the configured audience is in its `aud`, and it has not expired (`exp`,
`nbf`, with `leeway_seconds`). The JWKS is cached for `jwks_cache_seconds`; a token signed by a key
the cache does not know triggers one re-read (keys rotate), at most every 10 seconds so that garbage
tokens cannot make SUP hammer the issuer.

Roles: the token's realm roles (`realm_access.roles`) or, with `role_client`, that client's roles
(`resource_access.CLIENT.roles`), mapped through `oidc.roles`; the highest counts.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

from jwcrypto import jwk, jws, jwt
from jwcrypto.common import JWException

from sup.config import OidcSettings
from sup.domain.roles import Role, rank

log = logging.getLogger(__name__)
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]
MIN_REFRESH_SECONDS = 10.0


class InvalidToken(Exception):
    """The token is not acceptable; the message is safe to show (it never quotes the token)."""


@dataclass(frozen=True)
class OidcIdentity:
    subject: str
    username: str
    role: Role | None
    claims: dict[str, Any]


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and not token.startswith("sup_")


class OidcVerifier:
    def __init__(self, settings: OidcSettings) -> None:
        self.settings = settings
        self._keys: jwk.JWKSet | None = None
        self._fetched_at = 0.0
        self._lock = threading.Lock()
        self.fetches = 0

    # --- keys -----------------------------------------------------------------------------------------

    def _get_json(self, url: str) -> Any:
        context = ssl.create_default_context(cafile=self.settings.ca_file)
        if not self.settings.verify_tls:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310
        with urllib.request.urlopen(request, timeout=10, context=context) as response:  # noqa: S310
            return json.loads(response.read())

    def _jwks_url(self) -> str:
        if self.settings.jwks_url:
            return self.settings.jwks_url
        discovery = self._get_json(self.settings.issuer.rstrip("/") + "/.well-known/openid-configuration")
        return str(discovery["jwks_uri"])

    def keys(self, *, refresh: bool = False) -> jwk.JWKSet:
        with self._lock:
            now = time.monotonic()
            stale = now - self._fetched_at > self.settings.jwks_cache_seconds
            may_refresh = now - self._fetched_at >= MIN_REFRESH_SECONDS
            if self._keys is None or stale or (refresh and may_refresh):
                try:
                    document = self._get_json(self._jwks_url())
                    self._keys = jwk.JWKSet.from_json(json.dumps(document))
                    self._fetched_at = now
                    self.fetches += 1
                except (OSError, ValueError, KeyError, JWException) as exc:
                    log.warning("cannot read the issuer's JWKS: %s", type(exc).__name__)
                    if self._keys is None:
                        raise InvalidToken("the token issuer's keys cannot be read right now") from None
            return self._keys

    # --- tokens ---------------------------------------------------------------------------------------

    def verify(self, token: str) -> OidcIdentity:
        try:
            kid = jws.JWS.from_jose_token(token).jose_header.get("kid")
        except (JWException, ValueError):
            raise InvalidToken("the bearer token is not a valid JWT") from None
        keys = self.keys()
        if kid is not None and keys.get_key(kid) is None:
            keys = self.keys(refresh=True)  # a key rotated in since the last read
        check = {"iss": self.settings.issuer, "aud": self.settings.audience, "exp": None}
        try:
            parsed = jwt.JWT(jwt=token, key=keys, algs=ALGORITHMS, check_claims=check, expected_type="JWS")
            parsed.leeway = self.settings.leeway_seconds
            parsed.validate(keys)
            claims = json.loads(parsed.claims)
        except jwt.JWTExpired:
            raise InvalidToken("the token has expired") from None
        except jwt.JWTInvalidClaimValue as exc:
            raise InvalidToken(f"the token is not for SUP: {_claim_of(exc)}") from None
        except (JWException, ValueError, TypeError):
            raise InvalidToken("the token's signature or claims are not valid") from None
        subject = str(claims.get("sub") or "")
        if not subject:
            raise InvalidToken("the token has no subject")
        username = str(claims.get(self.settings.username_claim) or subject)
        return OidcIdentity(subject=subject, username=username, role=self.role_of(claims), claims=claims)

    def role_of(self, claims: dict[str, Any]) -> Role | None:
        if self.settings.role_client:
            access = (claims.get("resource_access") or {}).get(self.settings.role_client) or {}
        else:
            access = claims.get("realm_access") or {}
        names = access.get("roles") or []
        roles = [
            Role(self.settings.roles[n]) for n in names if isinstance(n, str) and n in self.settings.roles
        ]
        return max(roles, key=rank) if roles else None


def _claim_of(exc: Exception) -> str:
    text = str(exc)
    for claim in ("iss", "aud"):
        if f"'{claim}'" in text or f'"{claim}"' in text or f" {claim} " in text:
            return f"wrong {claim}"
    return "wrong issuer or audience"
