"""Settings and policy.

Read from the environment (`SUP_*`, nested keys joined with `__`, e.g. `SUP_LDAP__URL`) and, when
`SUP_CONFIG` names a YAML file, from that file (the same keys, nested). The environment wins over the
file. A target whose section is absent is disabled; a section that is present must be complete.
Secrets are `SecretStr`: they never show in reprs, logs or error messages.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, SecretStr, create_model, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from sup.domain.usernames import UsernameRule
from sup.targets.registry import SPECS, TargetSections
from sup.targets.spec import TargetSpec

S = TypeVar("S", bound=BaseModel)

# Numbers that mean something to every Linux system and must never name a person or a group.
FORBIDDEN_IDS: frozenset[int] = frozenset({0, 65534, 65535, 4294967294, 4294967295})
MAX_ID = 4294967293


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class IdRange(_Section):
    min: int = Field(ge=1, le=MAX_ID)
    max: int = Field(ge=1, le=MAX_ID)

    @model_validator(mode="after")
    def _ordered(self) -> IdRange:
        if self.min > self.max:
            raise ValueError(f"range {self.min}-{self.max} is empty (min > max)")
        return self

    def __contains__(self, number: object) -> bool:
        return isinstance(number, int) and self.min <= number <= self.max

    def __str__(self) -> str:
        return f"{self.min}-{self.max}"


class IdPolicy(_Section):
    """Where uid and gid numbers come from (settings key `ids`)."""

    uid_range: IdRange = IdRange(min=10000, max=49999)
    gid_range: IdRange = Field(
        IdRange(min=50000, max=59999), description="gids of ordinary (non-private) groups"
    )
    private_groups: bool = Field(
        True, description="give every user a group of their own name as primary group"
    )
    private_gid: Literal["same_as_uid", "allocate"] = Field(
        "same_as_uid", description="a private group's gid equals the uid when free, or comes from gid_range"
    )
    default_primary_gid: int = Field(
        100, ge=1, le=MAX_ID, description="primary gid of users when private_groups is off"
    )
    supplied_uid_ranges: list[IdRange] = Field(
        default_factory=list, description="extra ranges in which uids supplied by a source are honoured"
    )
    supplied_gid_ranges: list[IdRange] = Field(
        default_factory=list, description="extra ranges in which gids supplied by a source are honoured"
    )

    @model_validator(mode="after")
    def _no_overlap(self) -> IdPolicy:
        if self.private_gid == "allocate" or not self.private_groups:
            return self
        u, g = self.uid_range, self.gid_range
        if u.min <= g.max and g.min <= u.max:
            raise ValueError(
                f"uid_range {u} overlaps gid_range {g}: with private_gid=same_as_uid, private and "
                "ordinary groups would compete for the same gids"
            )
        return self


class AccountPolicy(_Section):
    """Defaults and limits for POSIX account attributes (settings key `accounts`)."""

    home_template: str = Field("/home/{username}", description="home directory; {username} is replaced")
    default_shell: str = "/bin/bash"
    allowed_shells: list[str] = Field(
        default_factory=lambda: [
            "/bin/bash", "/usr/bin/bash", "/bin/sh", "/usr/bin/sh", "/bin/zsh", "/usr/bin/zsh",
            "/bin/tcsh", "/usr/bin/tcsh", "/usr/bin/fish", "/bin/dash", "/usr/bin/dash",
            "/usr/sbin/nologin", "/sbin/nologin", "/bin/false",
        ]
    )  # fmt: skip
    nologin_shell: str = "/usr/sbin/nologin"
    extra_reserved_names: list[str] = Field(
        default_factory=list, description="user and group names refused on top of the built-in list"
    )
    max_ssh_keys: int = Field(32, ge=1, le=1000)

    @field_validator("home_template")
    @classmethod
    def _home(cls, value: str) -> str:
        if not value.startswith("/") or "{username}" not in value:
            raise ValueError("home_template must be an absolute path containing {username}")
        return value

    @model_validator(mode="after")
    def _shells(self) -> AccountPolicy:
        for shell in (self.default_shell, self.nologin_shell):
            if shell not in self.allowed_shells:
                raise ValueError(f"shell {shell} must be listed in allowed_shells")
        return self


class RateLimit(_Section):
    """A token bucket per client: `requests_per_second` refill, up to `burst` at once."""

    requests_per_second: float = Field(
        50.0, gt=0, le=100000, description="sustained rate; Entra ID needs at least 25 per tenant"
    )
    burst: int = Field(100, ge=1, le=100000, description="requests allowed at once after a quiet spell")


ScimRateLimit = RateLimit  # the name SCIM code knows it by


class LogSettings(_Section):
    """How `sup serve` logs (settings key `log`): one JSON object per line, or text, to stderr."""

    format: Literal["json", "text"] = Field(
        "json", description="json: one object per line with time, level, logger, message, request_id"
    )


class ApiSettings(_Section):
    max_body_bytes: int = Field(1024 * 1024, ge=1024, description="larger request bodies get 413")
    default_page_size: int = Field(100, ge=1, le=10000)
    max_page_size: int = Field(1000, ge=1, le=100000)
    rate_limit: RateLimit = Field(
        RateLimit(requests_per_second=20, burst=200),
        description="writes (POST, PUT, PATCH, DELETE) under /api/v1 per bearer token (per client "
        "address without one); over it: 429 with Retry-After. SCIM has its own, scim.rate_limit",
    )


class KeycloakSettings(_Section):
    """The Keycloak source (settings key `keycloak`): SUP pulls users, groups and memberships from a
    realm with a confidential client's service account (client_credentials). The account needs the
    realm-management roles view-users, query-users, query-groups (and view-events for `admin_events`).
    """

    url: str = Field(description="Keycloak's base URL, e.g. https://id.example.org (no /realms/...)")
    realm: str = Field(min_length=1)
    client_id: str = Field(min_length=1)
    client_secret: SecretStr
    interval_seconds: int = Field(
        900, ge=0, description="seconds between scheduled full pulls in `sup serve`; 0: only on demand"
    )
    admin_events: bool = Field(
        True,
        description="between full pulls, read the realm's admin events (USER, GROUP, GROUP_MEMBERSHIP) "
        "every events_seconds and re-read only what they name; needs admin events on in the realm",
    )
    events_seconds: float = Field(30, ge=1, description="seconds between admin-event reads")
    page_size: int = Field(500, ge=1, le=5000, description="users, groups or members per request")
    timeout_seconds: int = Field(30, ge=1, le=600, description="per-request timeout")
    verify_tls: bool = True
    ca_file: str | None = Field(None, description="CA certificates (PEM) for Keycloak's TLS; default: system")
    groups_path: str = Field(
        "/",
        description="only groups at or below this path are pulled (e.g. /hpc); '/' pulls every group",
    )
    group_names: Literal["name", "path"] = Field(
        "name",
        description="a group's POSIX name comes from its own name (`name`: /hpc/gpu -> gpu) or from its "
        "path below groups_path (`path`: /hpc/gpu -> hpc-gpu with groups_path '/'), derived by the "
        "`naming` rules (lower case, other characters replaced; long names hashed)",
    )
    path_separator: Literal["-", "_", "."] = Field("-", description="joins path parts with group_names=path")
    ssh_key_attribute: str = Field("sshPublicKey", description="user attribute holding OpenSSH keys")
    uid_attribute: str = Field("uidNumber", description="user attribute with a uid to honour, if any")
    gid_attribute: str = Field("gidNumber", description="user attribute with the private group's gid")
    shell_attribute: str = Field("loginShell", description="user attribute with the login shell")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.fullmatch(r"https?://[^/?#\s]+(/[^?#\s]*)?", value):
            raise ValueError("must be http(s)://HOST[:PORT][/PATH]")
        return value.rstrip("/")

    @field_validator("groups_path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must start with '/'")
        return value.rstrip("/") or "/"


OidcRole = Literal["admin", "operator", "viewer"]


def _default_oidc_roles() -> dict[str, OidcRole]:
    return {"sup-admin": "admin", "sup-operator": "operator", "sup-viewer": "viewer"}


class OidcSettings(_Section):
    """OIDC access tokens on the admin API (settings key `oidc`), e.g. from a Keycloak realm.

    A bearer that is not a SUP token is verified as a JWT: signature by the issuer's JWKS (cached,
    re-read when a token names an unknown key), `iss`, `aud` and `exp`. Its roles map to SUP roles.
    """

    issuer: str = Field(description="the `iss` of accepted tokens, e.g. https://id.example.org/realms/hpc")
    audience: str = Field(description="must be in the token's `aud` (Keycloak: an audience mapper)")
    jwks_url: str | None = Field(None, description="default: from the issuer's OpenID discovery document")
    roles: dict[str, OidcRole] = Field(
        default_factory=_default_oidc_roles,
        description="token role -> SUP role; the highest one a token holds counts",
    )
    role_client: str | None = Field(
        None, description="read client roles of this client (resource_access); default: realm roles"
    )
    username_claim: str = Field("preferred_username", description="claim naming the person in logs")
    self_service: bool = Field(
        True, description="people may read /api/v1/me and manage their own keys at /api/v1/me/ssh-keys"
    )
    jwks_cache_seconds: int = Field(300, ge=0, description="how long the JWKS is kept before re-reading")
    leeway_seconds: int = Field(30, ge=0, le=300, description="clock skew allowed on exp/nbf")
    verify_tls: bool = True
    ca_file: str | None = None


class SourcePolicy(_Section):
    """Which source may change what another source owns (settings key `sources`)."""

    precedence: list[str] = Field(
        default_factory=list,
        description="sources, strongest first (`keycloak`, `scim:NAME` or `scim:*`, `api`, `import`): a "
        "source may take over a user or group owned by a source listed after it; a source not listed "
        "never takes over anything (the conflict is reported instead)",
    )

    def may_take_over(self, taker: str, owner: str) -> bool:
        """Whether `taker` may rewrite (and so own) what `owner` holds."""

        def rank(source: str) -> int | None:
            for index, entry in enumerate(self.precedence):
                if entry == source or (entry.endswith(":*") and source.startswith(entry[:-1])):
                    return index
            return None

        if taker == owner:
            return True
        mine, theirs = rank(taker), rank(owner)
        return mine is not None and (theirs is None or mine < theirs)


class ReconcileSettings(_Section):
    """The reconciler that `sup serve` runs (settings key `reconcile`)."""

    interval_seconds: int = Field(300, ge=5, description="seconds between scheduled full passes")
    max_deletions: int = Field(
        50,
        ge=0,
        description="a target whose plan deletes more than this many objects is not applied unless forced",
    )
    max_suspensions: int = Field(
        20,
        ge=0,
        description="a target that would lock or remove more users than this (users it holds active now) "
        "is not applied unless forced",
    )
    max_suspension_share: float = Field(
        0.1,
        ge=0,
        le=1,
        description="... or more than this share of the users it holds active, when that is over 5 users",
    )
    debounce_seconds: float = Field(
        0.3, ge=0, le=60, description="after a write, wait this long for more before a pass (bursts coalesce)"
    )
    poll_seconds: float = Field(0.5, gt=0, le=60, description="how often the worker looks at the outbox")
    max_backoff_seconds: float = Field(300, ge=1, description="longest wait before retrying a failed pass")
    leader_retry_seconds: float = Field(
        5, gt=0, le=300, description="how often a standby replica tries to become the active reconciler"
    )


class LifecycleSettings(_Section):
    """What happens to a deactivated user over time (settings key `lifecycle`)."""

    delete_after_days: float | None = Field(
        30,
        ge=0,
        description="a user suspended (active=false) this long is deleted from the store and then from the "
        "targets; null: never. Reactivated earlier, they get everything back with the same ids",
    )
    max_deletions_per_pass: int = Field(
        10,
        ge=1,
        description="users the scheduled pass deletes at most for having expired (oldest first), so that "
        "expiries trickle out instead of tripping reconcile.max_deletions",
    )


class ScimSettings(_Section):
    """The SCIM 2.0 service provider under /scim/v2 (settings key `scim`); works without settings."""

    cross_connection_writes: bool = Field(
        False,
        description="let a SCIM connection (token) change and delete users and groups another source "
        "created (the admin API, an import, another connection); off: 403",
    )
    group_names: Literal["derive", "exact"] = Field(
        "derive",
        description="derive: a group's POSIX name comes from its displayName by the `naming` rules "
        "('HPC Users' -> hpc_users); exact: the displayName must already be a POSIX group name",
    )
    rate_limit: ScimRateLimit = ScimRateLimit()
    default_page_size: int = Field(100, ge=1, le=10000, description="resources per page without `count`")
    max_results: int = Field(
        1000, ge=1, le=100000, description="at most this many resources per page (filter.maxResults)"
    )
    bulk_max_operations: int = Field(
        100, ge=0, le=10000, description="operations per /Bulk request; 0 turns /Bulk off"
    )
    bulk_max_payload_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="largest /Bulk body (bulk.maxPayloadSize); api.max_body_bytes caps it",
    )


class AccessPolicy(_Section):
    """Who is provisioned at all (settings key `access`)."""

    groups: list[str] = Field(
        default_factory=list,
        description="if set, only members of these groups are provisioned; empty: every active user",
    )


class SettingsBase(BaseSettings):
    """Every section but the targets'; `Settings` adds one optional section per registered target."""

    model_config = SettingsConfigDict(
        env_prefix="SUP_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    database_url: str = Field("sqlite:///sup.db", description="SQLAlchemy URL; SQLite file by default")
    ids: IdPolicy = IdPolicy()
    accounts: AccountPolicy = AccountPolicy()
    naming: UsernameRule = UsernameRule()
    api: ApiSettings = ApiSettings()
    log: LogSettings = LogSettings()
    access: AccessPolicy = AccessPolicy()
    keycloak: KeycloakSettings | None = None
    oidc: OidcSettings | None = None
    sources: SourcePolicy = SourcePolicy()
    reconcile: ReconcileSettings = ReconcileSettings()
    lifecycle: LifecycleSettings = LifecycleSettings()
    scim: ScimSettings = ScimSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get("SUP_CONFIG")
        if config_file:
            path = Path(config_file)
            if not path.is_file():
                raise FileNotFoundError(f"SUP_CONFIG names {config_file}, which is not a readable file")
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=path))
        return tuple(sources)

    def target_enabled(self, target: str) -> bool:
        return getattr(self, target, None) is not None

    def target_settings(self, spec: TargetSpec[S]) -> S | None:
        """The target's settings section, typed as its spec's model; None when the target is off."""
        section = getattr(self, spec.name, None)
        if section is None or isinstance(section, spec.settings_model):
            return section
        raise TypeError(f"settings section {spec.name!r} is a {type(section).__name__}, not its spec's model")

    @classmethod
    def with_targets(cls, specs: Sequence[TargetSpec[Any]]) -> type[Settings]:
        """These settings with a section for each of `specs` too (tests register a fake target so)."""
        return cast("type[Settings]", _compose(cls, specs))

    if TYPE_CHECKING:
        # The target sections are composed from the registry at import time (below): a type checker
        # takes their keyword arguments as they come, and their attributes from TargetSections.
        def __init__(self, **values: Any) -> None: ...

    def reserved_names(self) -> frozenset[str]:
        return frozenset(self.accounts.extra_reserved_names) | self.naming.extra_reserved


def _compose(base: type[SettingsBase], specs: Sequence[TargetSpec[Any]]) -> type[SettingsBase]:
    """`base` with one optional section per target spec, keyed by the spec's name (SUP_<NAME>__*)."""
    sections: dict[str, Any] = {spec.name: (spec.settings_model | None, None) for spec in specs}
    return create_model("Settings", __base__=base, __module__=__name__, **sections)


if TYPE_CHECKING:

    class Settings(SettingsBase, TargetSections):
        """SUP's settings: every section, and one per registered target (targets/registry.py)."""

        def __init__(self, **values: Any) -> None: ...

else:
    Settings = _compose(SettingsBase, SPECS)
    Settings.__doc__ = "SUP's settings: every section, and one per registered target (targets/registry.py)."


def load_settings(**overrides: Any) -> Settings:
    """Settings from SUP_CONFIG and the environment; keyword overrides win (used by tests and the CLI)."""
    return Settings(**overrides)
