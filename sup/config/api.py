"""The HTTP side: API limits (`api`), logging (`log`), OIDC bearer tokens (`oidc`) and the SCIM
service provider (`scim`)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from sup.common.sections import Section


class RateLimit(Section):
    """A token bucket per client: `requests_per_second` refill, up to `burst` at once."""

    requests_per_second: float = Field(
        50.0, gt=0, le=100000, description="sustained rate: the bucket refills by this many a second"
    )
    burst: int = Field(100, ge=1, le=100000, description="requests allowed at once after a quiet spell")


ScimRateLimit = RateLimit  # the name SCIM code knows it by


class LogSettings(Section):
    """How `sup serve` logs (settings key `log`): one JSON object per line, or text, to stderr."""

    format: Literal["json", "text"] = Field(
        "json",
        description="json: one object per line (time, level, logger, message, request_id and, for an "
        "error, exception); text: plain lines",
    )


class ApiSettings(Section):
    """The HTTP API's limits (settings key `api`): request size, paging, the rate of writes, and how
    long an idle client connection is kept."""

    max_body_bytes: int = Field(
        1024 * 1024, ge=1024, description="larger request bodies get 413, on every path"
    )
    default_page_size: int = Field(
        100, ge=1, le=10000, description="items per page of a list asked without `limit`"
    )
    max_page_size: int = Field(1000, ge=1, le=100000, description="the largest `limit` a list takes")
    rate_limit: RateLimit = Field(
        RateLimit(requests_per_second=20, burst=200),
        description="writes (POST, PUT, PATCH, DELETE) under /api/v1 per client, per SUP process: a "
        "client is a bearer token that verifies (a live SUP token; an OIDC token's issuer and sub), "
        "else the client address (no token, or a made-up one); past it: 429 with Retry-After. SCIM "
        "has its own, scim.rate_limit; the gateway's endpoints too, gateway.api_rate_limit",
    )
    keep_alive_seconds: int = Field(
        75,
        ge=1,
        le=3600,
        description="how long `sup serve` keeps an idle client connection open; keep it above the "
        "idle timeout of the clients' connection pools and of any load balancer in front (often 60 "
        "s), so SUP is never the side that closes a connection a client is about to reuse: a "
        "request sent as it closes is reset, not answered",
    )


SCIM_CONNECTION_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,58}")
"""A SCIM connection's name: a token name (sup/tokens/service.py) short enough for `scim:NAME`."""


KEYCLOAK_SOURCE = "keycloak"
"""The Keycloak pull's source: SOURCE of sup/sources/keycloak/naming.py, which this layer may not
import (tests/unit/test_config.py pins them equal)."""
SCIM_SOURCE_PREFIX = "scim:"
"""A SCIM connection NAME's source is `scim:NAME` (sup/scim/storage.py `connection_source`, pinned
equal by the same test)."""

PROFILE_CLAIMS = frozenset(
    {
        "name", "given_name", "family_name", "middle_name", "nickname", "preferred_username", "profile",
        "picture", "website", "email", "email_verified", "gender", "birthdate", "zoneinfo", "locale",
        "phone_number", "phone_number_verified", "address", "updated_at", "upn", "unique_name",
    }
)  # fmt: skip
"""Claims about a person that they or an administrator can change, or that another person may
later hold: OpenID Connect Core 1.0 §5.1 (all but `sub`; §5.7 says only `sub` with `iss` is a
stable identifier) and Entra ID's `upn` and `unique_name`. An account matched by one of these would
go to whoever holds the value next."""
TOKEN_CLAIMS = frozenset(
    {
        "iss", "aud", "azp", "exp", "nbf", "iat", "jti", "typ", "scope", "scp", "sid", "session_state",
        "auth_time", "nonce", "acr", "at_hash", "c_hash", "client_id", "cid", "appid", "idp", "tid", "ver",
    }
)  # fmt: skip
"""Claims about the token, its client, its session or the tenant, not the person: an account
matched by `iss`, `azp` or Entra ID's `tid` would be everybody's."""


def account_source_problem(source: str) -> str | None:
    """Why `source` cannot name accounts in oidc.accounts (None: it can)."""
    if source == KEYCLOAK_SOURCE:
        return None
    name = source.removeprefix(SCIM_SOURCE_PREFIX)
    if source.startswith(SCIM_SOURCE_PREFIX) and SCIM_CONNECTION_NAME.fullmatch(name):
        return None
    return (
        f"source {source!r}: must be {KEYCLOAK_SOURCE!r} or {SCIM_SOURCE_PREFIX}NAME for a SCIM "
        "connection NAME (1-59 characters: lower-case letters, digits, '_', '.', '-')"
    )


def account_claim_problem(source: str, claim: str) -> str | None:
    """Why `claim` cannot carry the external_id of `source`'s accounts (None: it can)."""
    where = f"source {source!r}"
    if not claim:
        return f"{where}: the claim name is empty"
    if not claim.isprintable() or any(c.isspace() for c in claim) or len(claim) > 256:
        return f"{where}: the claim name {claim!r} must be 1-256 printable characters without spaces"
    if claim in PROFILE_CLAIMS:
        return (
            f"{where}: {claim!r} is a profile claim that can change or pass to another person; use "
            "an id the identity provider assigns and nobody can edit (sub, or e.g. Entra ID's oid)"
        )
    if claim in TOKEN_CLAIMS:
        return f"{where}: {claim!r} describes the token, its client or the tenant, not the person"
    return None


def _default_oidc_accounts() -> dict[str, str]:
    return {KEYCLOAK_SOURCE: "sub"}


OidcRole = Literal["admin", "operator", "viewer"]


def _default_oidc_roles() -> dict[str, OidcRole]:
    return {"sup-admin": "admin", "sup-operator": "operator", "sup-viewer": "viewer"}


class OidcSettings(Section):
    """OIDC access tokens on the admin API (settings key `oidc`), e.g. from a Keycloak realm; absent,
    only SUP's own tokens are accepted.

    A bearer that is not a SUP token is verified as a JWT: signature by the issuer's JWKS (cached,
    re-read when a token names an unknown key), `iss`, `aud` and `exp`. Its roles map to SUP roles.
    """

    issuer: str = Field(
        description="the `iss` of accepted tokens", examples=["https://sso.example.org/realms/research"]
    )
    audience: str = Field(
        description="must be in the token's `aud` (Keycloak: an audience mapper on the client)",
        examples=["sup"],
    )
    jwks_url: str | None = Field(
        None, description="the token keys' URL; default: jwks_uri from the issuer's discovery document"
    )
    roles: dict[str, OidcRole] = Field(
        default_factory=_default_oidc_roles,
        description="token role -> SUP role (`admin`, `operator`, `viewer`); the highest one a token "
        "holds counts",
    )
    role_client: str | None = Field(
        None, description="a client id: read its client roles (resource_access); null: realm roles"
    )
    username_claim: str = Field(
        "preferred_username", description="claim naming who the token is, in the audit log (oidc:NAME)"
    )
    self_service: bool = Field(
        True, description="people may read /api/v1/me and manage their own keys at /api/v1/me/ssh-keys"
    )
    accounts: dict[str, str] = Field(
        default_factory=_default_oidc_accounts,
        description="self-service: source -> the token claim that carries the `external_id` of that "
        "source's accounts; a token reaches the one account whose source and external_id match a claim "
        "it holds (a non-empty string), and none when two match (409). A source is `keycloak` or "
        "`scim:NAME` (a SCIM connection); name only a source whose external ids are set by the "
        "issuer's own IdP, and a claim it assigns and nobody can edit (never email or a username: "
        "refused). docs/identity-providers.md",
        examples=[{"keycloak": "sub", "scim:okta": "uid"}, {"scim:entra": "oid"}],
    )
    jwks_cache_seconds: int = Field(
        300, ge=0, description="the keys are re-read after this, or when a token names a key not known yet"
    )
    leeway_seconds: int = Field(30, ge=0, le=300, description="clock skew allowed on exp and nbf")
    verify_tls: bool = Field(
        True,
        description="verify the TLS certificate of the issuer and the JWKS URL; false: a test realm only",
    )
    ca_file: str | None = Field(
        None, description="CA certificates (PEM) that sign the issuer's; default: the system's"
    )
    allow_insecure_http: bool = Field(
        False,
        description="true: accept plain-http issuer and JWKS URLs (a test realm on loopback), never in "
        "production; otherwise https only, also for the jwks_uri of the discovery document",
    )

    @field_validator("accounts")
    @classmethod
    def _accounts(cls, value: dict[str, str]) -> dict[str, str]:
        problems = [
            problem
            for source, claim in value.items()
            for problem in (account_source_problem(source), account_claim_problem(source, claim))
            if problem is not None
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @model_validator(mode="after")
    def _https_only(self) -> OidcSettings:
        for key, url in (("issuer", self.issuer), ("jwks_url", self.jwks_url)):
            problem = self.url_problem(url) if url is not None else None
            if problem is not None:
                raise ValueError(f"oidc.{key}: {problem}")
        return self

    def url_problem(self, url: str) -> str | None:
        """Why SUP will not read the token keys from `url` (None: it will)."""
        allow = "oidc.allow_insecure_http: true (SUP_OIDC__ALLOW_INSECURE_HTTP=true)"
        return url_problem(url, self.allow_insecure_http, allow)


TOKENS_AT_RISK = "tokens could be forged or vouched for in transit"


def url_problem(
    url: str,
    allow_insecure_http: bool,
    how_to_allow: str,
    risk: str = TOKENS_AT_RISK,
    where: str = "a test realm",
) -> str | None:
    """Why SUP will not exchange credentials or secrets with `url` (None: it will): https only, plain
    http only when the settings allow it (`where` says for what: a test realm on loopback); `risk`
    says what plain http would expose."""
    scheme = url.partition(":")[0].lower()
    if scheme == "https" or (scheme == "http" and allow_insecure_http):
        return None
    if scheme == "http":
        return f"{url!r} is plain http, so {risk}: use https, or set {how_to_allow} for {where}"
    return f"{url!r} is not an https URL"


class ScimOAuthConnection(Section):
    """A SCIM connection whose identity provider pushes with OAuth access tokens it issues itself
    (settings key `scim.oauth.NAME`), instead of a static SUP token. What it writes has the source
    `scim:NAME`, as with a static token of that name.

    With `introspection_url`, every token is checked at the issuer's RFC 7662 endpoint (opaque or
    JWT); without, a token must be a JWT signed by a key of the issuer's JWKS (e.g. Entra ID's OAuth
    option). Either way it is accepted only when it is active, its `iss` is `issuer`, its `aud`
    names `audience` and its `exp` has not passed.
    """

    issuer: str = Field(
        description="the `iss` of accepted tokens", examples=["https://sso.example.org/realms/research"]
    )
    introspection_url: str | None = Field(
        None,
        description="the RFC 7662 endpoint that says whether a token is active; null: tokens are JWTs "
        "verified by the issuer's JWKS",
        examples=["https://sso.example.org/realms/research/protocol/openid-connect/token/introspect"],
    )
    client_id: str | None = Field(
        None, description="SUP's client at the introspection endpoint (HTTP Basic authentication)"
    )
    client_secret: SecretStr | None = Field(None, description="that client's secret")
    audience: str | None = Field(
        None,
        description="must be in the token's `aud`; default: client_id (introspection). Required for JWKS",
    )
    jwks_url: str | None = Field(
        None, description="JWKS only: the token keys' URL; default: jwks_uri from the issuer's discovery"
    )
    cache_seconds: int = Field(
        60,
        ge=0,
        le=3600,
        description="an active token is taken without asking again for this long (never past its exp); "
        "the bound on how long a token revoked at the issuer still works",
    )
    jwks_cache_seconds: int = Field(300, ge=0, description="JWKS only: the keys are re-read after this")
    leeway_seconds: int = Field(30, ge=0, le=300, description="clock skew allowed on exp and nbf")
    timeout_seconds: float = Field(
        5.0, gt=0, le=60, description="one introspection request; past it the SCIM request gets 503"
    )
    verify_tls: bool = Field(
        True, description="verify the issuer's TLS certificate; false: a test realm only"
    )
    ca_file: str | None = Field(
        None, description="CA certificates (PEM) that sign the issuer's; default: the system's"
    )
    allow_insecure_http: bool = Field(
        False, description="true: accept plain-http URLs (a test realm on loopback), never in production"
    )

    @model_validator(mode="after")
    def _complete(self) -> ScimOAuthConnection:
        hint = "scim.oauth.NAME.allow_insecure_http: true"
        for key in ("issuer", "introspection_url", "jwks_url"):
            url = getattr(self, key)
            problem = url_problem(url, self.allow_insecure_http, hint) if url is not None else None
            if problem is not None:
                raise ValueError(f"{key}: {problem}")
        if self.introspection_url is not None:
            if not self.client_id or self.client_secret is None:
                raise ValueError("introspection_url needs client_id and client_secret (SUP's client there)")
            if self.jwks_url is not None:
                raise ValueError("give introspection_url or jwks_url, not both")
        elif not self.audience:
            raise ValueError(
                "a JWKS connection (no introspection_url) needs audience: the aud its tokens carry"
            )
        return self

    @property
    def expected_audience(self) -> str:
        return self.audience or self.client_id or ""


class ScimSettings(Section):
    """The SCIM 2.0 service provider under /scim/v2 (settings key `scim`); works without settings.
    Setting up identity providers: docs/identity-providers.md."""

    cross_connection_writes: bool = Field(
        False,
        description="true: a SCIM connection (token) may change and delete users and groups another "
        "source created (another connection, the admin API, an import); false: 403",
    )
    group_names: Literal["derive", "exact"] = Field(
        "derive",
        description="derive: a group's POSIX name comes from its displayName by the `naming` rules "
        "('HPC Users' -> hpc_users; long names end in _ and 8 hex digits); exact: the displayName must "
        "already be a POSIX group name",
    )
    nested_groups: Literal["refuse", "flatten"] = Field(
        "refuse",
        description="a Group member of a Group (type Group, or a $ref to /Groups/ID, or the id of a "
        "group): refuse answers 400; flatten stores the nested group's members (at any depth) as members, "
        "as they are when the outer group is written",
    )
    rate_limit: ScimRateLimit = Field(
        ScimRateLimit(),
        description="requests per connection (token), per SUP process; past it: 429 with Retry-After. "
        "Entra ID needs at least 25 a second",
    )
    default_page_size: int = Field(100, ge=1, le=10000, description="resources per page without `count`")
    max_results: int = Field(
        1000,
        ge=1,
        le=100000,
        description="at most this many resources per page, the largest page (filter.maxResults)",
    )
    bulk_max_operations: int = Field(
        100,
        ge=0,
        le=10000,
        description="operations per /Bulk request (bulk.maxOperations); 0 turns /Bulk off",
    )
    bulk_max_payload_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="largest /Bulk body (bulk.maxPayloadSize); never above api.max_body_bytes, which caps it",
    )
    oauth: dict[str, ScimOAuthConnection] = Field(
        default_factory=dict,
        description="connections that push with OAuth access tokens their IdP issues (introspection or "
        "JWKS), by connection name; docs/identity-providers.md",
    )

    @field_validator("oauth")
    @classmethod
    def _connection_names(cls, value: dict[str, ScimOAuthConnection]) -> dict[str, ScimOAuthConnection]:
        for name in value:
            if not SCIM_CONNECTION_NAME.fullmatch(name):
                raise ValueError(
                    f"connection name {name!r}: 1-59 characters, lower-case letters, digits, '_', '.', '-'"
                )
        return value
