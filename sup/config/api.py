"""The HTTP side: API limits (`api`), logging (`log`), OIDC bearer tokens (`oidc`) and the SCIM
service provider (`scim`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

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

    @model_validator(mode="after")
    def _https_only(self) -> OidcSettings:
        for key, url in (("issuer", self.issuer), ("jwks_url", self.jwks_url)):
            problem = self.url_problem(url) if url is not None else None
            if problem is not None:
                raise ValueError(f"oidc.{key}: {problem}")
        return self

    def url_problem(self, url: str) -> str | None:
        """Why SUP will not read the token keys from `url` (None: it will): whoever can change the
        keys in transit can sign tokens, so https only, plain http only with allow_insecure_http."""
        scheme = url.partition(":")[0].lower()
        if scheme == "https" or (scheme == "http" and self.allow_insecure_http):
            return None
        if scheme == "http":
            return (
                f"{url!r} is plain http, so the token keys could be replaced in transit: use https, or set "
                "oidc.allow_insecure_http: true (SUP_OIDC__ALLOW_INSECURE_HTTP=true) for a test realm"
            )
        return f"{url!r} is not an https URL"


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
