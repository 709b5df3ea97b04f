"""OIDC access tokens (e.g. from a Keycloak realm) as bearer tokens on the admin API.

A token is accepted when its JWS signature verifies against a key of the issuer's JWKS (RS/ES/PS
algorithms only: never `none` or HMAC, which would let anybody who knows a public key sign), its `iss`
is the configured issuer, the configured audience is in its `aud`, it is valid now (`exp`, and `nbf`
when present, each with `leeway_seconds`), and it is an access token: an RFC 9068 token says so in
its header (`typ: at+jwt`), a Keycloak token in its `typ` claim (`Bearer`; ID tokens carry `ID`,
refresh tokens `Refresh`). A token that declares another type is refused; one that declares none
(IdPs that mark neither) is taken on its audience alone. The keys are read over https only, unless
`allow_insecure_http` is set (also for a `jwks_uri` the discovery document names).

The JWKS is cached for `jwks_cache_seconds`; a token signed by a key the cache does not know
triggers one re-read (keys rotate), at most every 10 seconds so that garbage tokens cannot make SUP
hammer the issuer.

Roles: the token's realm roles (`realm_access.roles`) or, with `role_client`, that client's roles
(`resource_access.CLIENT.roles`), mapped through `oidc.roles`; the highest counts. A role claim of
the wrong shape (`realm_access` a list, `roles` a string) makes the token invalid (401).
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable
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


class UnsafeUrl(ValueError):
    """The discovery document names a JWKS URL that the settings do not allow (plain http)."""


@dataclass(frozen=True)
class OidcIdentity:
    subject: str
    username: str
    role: Role | None
    claims: dict[str, Any]


# Where a request's verified OIDC identity is kept (request.state / the ASGI scope's "state"), as
# (token, identity), once something has checked it: the write rate limit checks writes' tokens to
# count them per person, and the auth dependency then takes the identity instead of checking again.
VERIFIED_OIDC = "sup_verified_oidc"


def verified_or_none(verifier: OidcVerifier, token: str) -> OidcIdentity | None:
    """The identity `token` verifies to, or None: for who only needs to know (the rate limit); the
    auth dependency verifies again to say why not. May read the JWKS (blocking)."""
    try:
        return verifier.verify(token)
    except InvalidToken:
        return None


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and not token.startswith("sup_")


class OidcVerifier:
    def __init__(self, settings: OidcSettings, fetch: Callable[[str], Any] | None = None) -> None:
        """`fetch` reads a JSON document from a URL (default: over HTTP(S), as the settings say;
        tests give a local issuer's documents)."""
        self.settings = settings
        self._fetch = fetch or self._get_json
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
        discovery = self._fetch(self.settings.issuer.rstrip("/") + "/.well-known/openid-configuration")
        url = str(discovery["jwks_uri"])
        problem = self.settings.url_problem(url)
        if problem is not None:
            raise UnsafeUrl(f"the discovery document's jwks_uri: {problem}")
        return url

    def keys(self, *, refresh: bool = False) -> jwk.JWKSet:
        with self._lock:
            now = time.monotonic()
            stale = now - self._fetched_at > self.settings.jwks_cache_seconds
            may_refresh = now - self._fetched_at >= MIN_REFRESH_SECONDS
            if self._keys is None or stale or (refresh and may_refresh):
                try:
                    document = self._fetch(self._jwks_url())
                    self._keys = jwk.JWKSet.from_json(json.dumps(document))
                    self._fetched_at = now
                    self.fetches += 1
                except (OSError, ValueError, KeyError, JWException) as exc:
                    # Only our own message is logged whole: the others may quote what the issuer sent.
                    log.warning(
                        "cannot read the issuer's JWKS: %s",
                        exc if isinstance(exc, UnsafeUrl) else type(exc).__name__,
                    )
                    if self._keys is None:
                        raise InvalidToken("the token issuer's keys cannot be read right now") from None
            return self._keys

    # --- tokens ---------------------------------------------------------------------------------------

    def verify(self, token: str) -> OidcIdentity:
        claims = self.verified_claims(token)
        subject = str(claims.get("sub") or "")
        if not subject:
            raise InvalidToken("the token has no subject")
        named = claims.get(self.settings.username_claim)
        username = named if isinstance(named, str) and named else subject
        return OidcIdentity(subject=subject, username=username, role=self.role_of(claims), claims=claims)

    def verified_claims(self, token: str) -> dict[str, Any]:
        """The claims of `token` once its signature, iss, aud, exp, nbf and type are checked: a
        genuine, current access token for SUP (who it names is the caller's business)."""
        try:
            kid = jws.JWS.from_jose_token(token).jose_header.get("kid")
        except (JWException, ValueError):
            raise InvalidToken("the bearer token is not a valid JWT") from None
        keys = self.keys()
        if kid is not None and keys.get_key(kid) is None:
            keys = self.keys(refresh=True)  # a key rotated in since the last read
        check = {"iss": self.settings.issuer, "aud": self.settings.audience, "exp": None}
        try:
            # Parsed first and validated after the leeway is set: given a key, the constructor
            # would validate at once with jwcrypto's own default leeway.
            parsed = jwt.JWT(algs=ALGORITHMS, check_claims=check, expected_type="JWS")
            parsed.leeway = self.settings.leeway_seconds
            parsed.deserialize(token)
            parsed.validate(keys)
            header = json.loads(parsed.header)
            claims = json.loads(parsed.claims)
        except jwt.JWTExpired:
            raise InvalidToken("the token has expired") from None
        except jwt.JWTInvalidClaimValue as exc:
            raise InvalidToken(f"the token is not for SUP: {_claim_of(exc)}") from None
        except (JWException, ValueError, TypeError):
            raise InvalidToken("the token's signature or claims are not valid") from None
        # Checked only once the signature holds: the reasons below describe a genuine token.
        self._check_not_before(claims)
        check_access_token(header, claims)
        return dict(claims)

    def _check_not_before(self, claims: dict[str, Any]) -> None:
        """`nbf` (RFC 7519 §4.1.5), with the leeway. jwcrypto checks it only when no claims to check
        are given, and we give some (iss, aud, exp)."""
        not_before = claims.get("nbf")
        if not_before is None:
            return
        if isinstance(not_before, bool) or not isinstance(not_before, int | float):
            raise InvalidToken("the token's nbf is not a number")
        if not_before > time.time() + self.settings.leeway_seconds:
            raise InvalidToken("the token is not valid yet (its nbf is in the future)")

    def role_of(self, claims: dict[str, Any]) -> Role | None:
        """The SUP role the token's roles map to (None: none of them). A role claim of the wrong
        shape is an InvalidToken: an issuer that sends it is misconfigured, and guessing is unsafe."""
        if self.settings.role_client:
            clients = _object_claim(claims, "resource_access")
            access = _object_claim(clients, self.settings.role_client, "resource_access.")
            where = f"resource_access.{self.settings.role_client}"
        else:
            access, where = _object_claim(claims, "realm_access"), "realm_access"
        names = access.get("roles")
        if names is None:
            return None
        if not isinstance(names, list):
            raise InvalidToken(f"the token's {where}.roles claim is not a list")
        roles = [
            Role(self.settings.roles[n]) for n in names if isinstance(n, str) and n in self.settings.roles
        ]
        return max(roles, key=rank) if roles else None


ACCESS_TOKEN_MEDIA_TYPES = frozenset({"jwt", "at+jwt"})
"""Header `typ` values of an access token (RFC 9068 §2.1: at+jwt; RFC 7519 §5.1: JWT, which Keycloak
puts on all its tokens), compared without `application/` and case (RFC 7515 §4.1.9)."""


def check_access_token(header: dict[str, Any], claims: dict[str, Any]) -> None:
    """Refuse a token that says it is not an access token: an ID token (Keycloak `typ: ID`) is proof
    of a login made for some client, not a grant to call SUP."""
    media_type = header.get("typ")
    if media_type is not None:
        normal = str(media_type).lower().removeprefix("application/")
        if normal not in ACCESS_TOKEN_MEDIA_TYPES:
            raise InvalidToken("the token's header typ is not that of an access token (at+jwt or JWT)")
    kind = claims.get("typ")
    if kind is None or (isinstance(kind, str) and kind.lower() == "bearer"):
        return
    if isinstance(kind, str) and kind.lower() == "id":
        raise InvalidToken("this is an ID token (typ ID); SUP takes access tokens (typ Bearer, or at+jwt)")
    raise InvalidToken("the token's typ is not Bearer: it is not an access token")


def _object_claim(claims: dict[str, Any], name: str, prefix: str = "") -> dict[str, Any]:
    """The JSON object `claims[name]` ({} when absent); anything else is an InvalidToken."""
    value = claims.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidToken(f"the token's {prefix}{name} claim is not a JSON object")
    return value


def _claim_of(exc: Exception) -> str:
    text = str(exc)
    for claim in ("iss", "aud"):
        if f"'{claim}'" in text or f'"{claim}"' in text or f" {claim} " in text:
            return f"wrong {claim}"
    return "wrong issuer or audience"
