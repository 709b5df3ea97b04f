"""Settings and policy.

Read from the environment (`SUP_*`, nested keys joined with `__`, e.g. `SUP_LDAP__URL`) and, when
`SUP_CONFIG` names a YAML file, from that file (the same keys, nested). The environment wins over the
file. A target whose section is absent is disabled; a section that is present must be complete.
Secrets are `SecretStr`: they never show in reprs, logs or error messages.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from sup.domain import ownership
from sup.domain.posix import check_name
from sup.domain.usernames import UsernameRule

TARGETS: tuple[str, ...] = ("ldap", "slurm", "kube")

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


class LdapSettings(_Section):
    """The LDAP target (settings key `ldap`): where SUP writes, what it owns there, how it connects.

    SUP owns everything below `users_dn`, `groups_dn` and `sudoers_dn` (they must lie below
    `base_dn` and not inside one another); everything else in the directory is only read, to find
    uid, uidNumber, group name and gidNumber collisions.
    """

    url: str = Field(description="ldap://host[:port] or ldaps://host[:port]")
    bind_dn: str
    bind_password: SecretStr
    base_dn: str
    schema_: Literal["rfc2307bis", "rfc2307"] = Field("rfc2307bis", alias="schema")
    users_dn: str | None = Field(None, description="default ou=people,BASE")
    groups_dn: str | None = Field(None, description="default ou=groups,BASE")
    sudoers_dn: str | None = Field(None, description="default ou=SUDOers,BASE")
    group_class: str = Field(
        "groupOfNames",
        pattern=r"^[A-Za-z][A-Za-z0-9-]*$",
        description="rfc2307bis: the structural object class beside posixGroup (must allow `member`)",
    )
    empty_group_member: str | None = Field(
        "cn=empty-membership-placeholder",
        description="rfc2307bis: the member DN an empty group holds, because groupOfNames needs one "
        "(a DN that is no entry, outside every search base); null (or empty) with a class whose member "
        "is optional",
    )
    unknown_entries: Literal["delete", "report"] = Field(
        "delete", description="entries below SUP's OUs that the store does not know"
    )
    deactivated: Literal["lock", "delete"] = Field(
        "lock",
        description="lock: keep the entry with no keys, no groups, the nologin shell; delete: remove it",
    )
    admin_groups: list[str] = Field(
        default_factory=list, description="groups whose members get a sudoRole (sudo through sssd)"
    )
    sudo_commands: list[str] = Field(default_factory=lambda: ["ALL"], min_length=1)
    sudo_hosts: list[str] = Field(default_factory=lambda: ["ALL"], min_length=1)
    sudo_options: list[str] = Field(
        default_factory=lambda: ["!authenticate"],
        description="sudoOption values; SUP's users log in with SSH keys and have no password to type",
    )
    page_size: int = Field(500, ge=1, le=100000, description="entries per page of a paged search")
    pipeline_depth: int = Field(64, ge=1, le=10000, description="writes in flight at once (1: one by one)")
    timeout_seconds: int = Field(30, ge=1, le=3600, description="connect and per-operation timeout")
    start_tls: bool = Field(False, description="StartTLS on an ldap:// URL")
    ca_file: str | None = Field(
        None, description="CA certificates (PEM) to verify the server; default: system"
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.fullmatch(r"ldaps?://[^/?#\s]+/?", value):
            raise ValueError("must be ldap://HOST[:PORT] or ldaps://HOST[:PORT]")
        return value

    @field_validator("empty_group_member", mode="before")
    @classmethod
    def _no_placeholder(cls, value: object) -> object:
        return None if value == "" else value  # SUP_LDAP__EMPTY_GROUP_MEMBER= (empty): none

    @field_validator("admin_groups")
    @classmethod
    def _admin_groups(cls, value: list[str]) -> list[str]:
        for name in value:
            check_name(name, kind="admin group")
        return value

    @field_validator("sudo_commands", "sudo_hosts", "sudo_options")
    @classmethod
    def _sudo_values(cls, value: list[str]) -> list[str]:
        for item in value:
            if not item.strip() or not item.isascii() or not item.isprintable():
                raise ValueError(f"{item!r} must be printable ASCII (sudo's LDAP schema stores IA5 strings)")
        return value

    @model_validator(mode="after")
    def _directory_shape(self) -> LdapSettings:
        from sup.targets.ldap.dn import InvalidDn, is_under, normalize

        if self.start_tls and self.url.startswith("ldaps://"):
            raise ValueError("start_tls applies to ldap:// URLs; an ldaps:// URL is TLS already")
        names = {"base_dn": self.base_dn, "bind_dn": self.bind_dn, **self.containers()}
        if self.empty_group_member is not None:
            names["empty_group_member"] = self.empty_group_member
        normal = {}
        for key, dn in names.items():
            try:
                normal[key] = normalize(dn)
            except InvalidDn as exc:
                raise ValueError(f"{key} is not a distinguished name: {exc}") from None
            if not normal[key]:
                raise ValueError(f"{key} must not be empty")
        containers = ("users_dn", "groups_dn", "sudoers_dn")
        for key in containers:
            if not is_under(normal[key], normal["base_dn"]):
                raise ValueError(f"{key} {names[key]} must lie below base_dn {self.base_dn}")
            for other in containers:
                if key != other and (normal[key] == normal[other] or is_under(normal[key], normal[other])):
                    raise ValueError(f"{key} and {other} must be different OUs, neither inside the other")
        return self

    def containers(self) -> dict[str, str]:
        """The DNs of the three OUs SUP owns, defaults filled in."""
        return {
            "users_dn": self.users_dn or f"ou=people,{self.base_dn}",
            "groups_dn": self.groups_dn or f"ou=groups,{self.base_dn}",
            "sudoers_dn": self.sudoers_dn or f"ou=SUDOers,{self.base_dn}",
        }


_SLURM_NAME = re.compile(r"^[a-z0-9_][a-z0-9_.-]*$")
AdminLevel = Literal["Operator", "Administrator"]


class SlurmSettings(_Section):
    """The Slurm accounting target (settings key `slurm`); see README "Slurm target"."""

    cluster: str = Field(description="the cluster SUP provisions (as registered in slurmdbd)")
    sacctmgr: str = Field("sacctmgr", description="path of sacctmgr; SLURM_CONF passes through")
    clusters: list[str] = Field(
        default_factory=list, description="more clusters of the same slurmdbd, provisioned alike"
    )
    ignore_accounts: list[str] = Field(
        default_factory=list, description="accounts SUP never changes (root always is)"
    )
    ignore_users: list[str] = Field(
        default_factory=list, description="users SUP never changes (root always is)"
    )
    admin_groups: dict[str, AdminLevel] = Field(
        default_factory=dict,
        description="group -> Slurm AdminLevel of its members; when set, SUP owns its users' AdminLevel",
    )
    user_fairshare: int | Literal["parent"] | None = Field(
        None, description="Fairshare of every user association; None leaves it as Slurm has it"
    )
    prune_accounts: bool = Field(
        False, description="delete accounts below root that SUP does not know (else only report them)"
    )
    chunk_size: int = Field(
        1000, ge=1, le=20000, description="names per sacctmgr call (measured: bench/slurm_bench.py)"
    )
    command_timeout: float = Field(900.0, gt=0, description="seconds before a sacctmgr call is abandoned")
    lock_dir: str = Field(
        "/run/lock/sup", description="directory of the host-local writer lock (one file per slurmdbd)"
    )
    lock_timeout: float = Field(600.0, ge=0, description="seconds to wait for another slurmdbd writer")
    slurmdbd: str | None = Field(
        None,
        description="host:port naming the slurmdbd in lock names; default read from SLURM_CONF's "
        "AccountingStorageHost/Port",
    )

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: str) -> str:
        return _slurm_name(value, "cluster")

    @field_validator("clusters", "ignore_accounts", "ignore_users")
    @classmethod
    def _names(cls, values: list[str]) -> list[str]:
        for value in values:
            _slurm_name(value, "name")
        if len(set(values)) != len(values):
            raise ValueError("a name is listed twice")
        return values

    @field_validator("sacctmgr", "lock_dir")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="after")
    def _no_repeated_cluster(self) -> SlurmSettings:
        if self.cluster in self.clusters:
            raise ValueError(f"cluster {self.cluster!r} is also listed in clusters")
        return self

    def all_clusters(self) -> list[str]:
        """The effective cluster list: `cluster` first, then `clusters`."""
        return [self.cluster, *self.clusters]


def _slurm_name(value: str, what: str) -> str:
    if not _SLURM_NAME.match(value):
        raise ValueError(
            f"{what} {value!r} is not a valid Slurm name (lower-case letters, digits, '_', '.', '-')"
        )
    return value


class KubeSettings(_Section):
    """The Kubernetes target (settings key `kube`): per user a home PersistentVolumeClaim and a login
    StatefulSet (one sshd pod) with its Service and NetworkPolicy, all in `namespace`; per group named
    in `group_pods`, a shared login pod. Rendered from templates/kube/*.yaml.j2 (`templates_dir`
    overrides them file by file). Objects carry `app.kubernetes.io/managed-by: sup`; SUP never writes
    an object without it.
    """

    namespace: str = Field(description="where the per-user objects live (RFC 1123 label)")
    kubeconfig: str | None = Field(
        None, description="kubeconfig file; absent: the in-cluster service account (running in a pod)"
    )
    context: str | None = Field(None, description="kubeconfig context; default: its current context")
    field_manager: str = Field(
        "sup", min_length=1, max_length=120, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="server-side apply field manager; SUP owns exactly the fields it applies under it",
    )  # fmt: skip
    templates_dir: str | None = Field(
        None, description="a directory whose *.yaml.j2 files replace the shipped ones of the same name"
    )
    home_size: str = Field("10Gi", description="home volume size; a larger value grows existing claims")
    home_storage_class: str | None = Field(None, description="default: the cluster's default class")
    home_access_mode: Literal["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"] = "ReadWriteOnce"
    pvc_retention: str = Field(
        "keep",
        description="how long a home claim outlives its user's deactivation or removal: 'keep' (for "
        "ever) or a duration such as 30d, 12h, 0s",
    )
    image: str = Field("sup-login:latest", description="login image: sshd (and sssd) as described in README")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    image_pull_secrets: list[str] = Field(default_factory=list, description="names of Secrets in namespace")
    cpu: str = Field("4", description="CPU limit of a login pod")
    memory: str = Field("8Gi", description="memory limit of a login pod")
    cpu_request: str | None = Field(None, description="default: equal to cpu")
    memory_request: str | None = Field(None, description="default: equal to memory")
    node_selector: dict[str, str] = Field(default_factory=dict)
    ssh_port: int = Field(
        2222,
        ge=1024,
        le=65535,
        description="sshd's port inside the pod (unprivileged: sshd runs as the user)",
    )
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    service_port: int = Field(22, ge=1, le=65535)
    ssh_sources: list[str] = Field(
        default_factory=list, description="CIDRs allowed to reach sshd; empty: no ssh ingress at all"
    )
    dns_namespace: str = Field("kube-system", description="namespace of the cluster DNS pods")
    dns_pod_labels: dict[str, str] = Field(default_factory=lambda: {"k8s-app": "kube-dns"})
    dns_cidrs: list[str] = Field(default_factory=list, description="extra DNS servers, e.g. node-local DNS")
    ldap_cidrs: list[str] = Field(default_factory=list, description="the LDAP servers sssd reads")
    ldap_ports: list[int] = Field(default_factory=lambda: [389, 636])
    slurmctld_cidrs: list[str] = Field(default_factory=list, description="the Slurm controller(s)")
    slurmctld_ports: list[int] = Field(default_factory=lambda: [6817])
    egress_cidrs: list[str] = Field(default_factory=list, description="other destinations, every port")
    blocked_cidrs: list[str] = Field(
        default_factory=lambda: ["169.254.169.254/32", "fd00:ec2::254/128"],
        description="never reachable, even inside an allowed CIDR (cloud metadata addresses)",
    )
    group_pods: list[str] = Field(
        default_factory=list, description="groups that get a shared login pod their members can use"
    )
    page_size: int = Field(500, ge=1, le=10000, description="objects per page of a list")
    timeout_seconds: int = Field(30, ge=1, le=600, description="per-request timeout")
    workers: int = Field(8, ge=1, le=64, description="writes in flight at once")

    @field_validator("namespace", "dns_namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        from sup.targets.kube.values import dns_label

        return dns_label(value, "namespace")

    @field_validator("home_size", "cpu", "memory", "cpu_request", "memory_request")
    @classmethod
    def _quantity(cls, value: str | None) -> str | None:
        from sup.targets.kube.values import positive_quantity

        return None if value is None else positive_quantity(value)

    @field_validator("pvc_retention")
    @classmethod
    def _retention(cls, value: str) -> str:
        from sup.targets.kube.values import parse_retention

        parse_retention(value)
        return value

    @field_validator("home_storage_class", "image", "kubeconfig", "context", "templates_dir")
    @classmethod
    def _one_word(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or any(c.isspace() for c in value)):
            raise ValueError("must be non-empty and without spaces")
        return value

    @field_validator("image_pull_secrets")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        from sup.targets.kube.values import dns_label

        return [dns_label(v, "secret name") for v in value]

    @field_validator("node_selector", "dns_pod_labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        from sup.targets.kube.values import label_key, label_value

        return {label_key(k): label_value(v) for k, v in value.items()}

    @field_validator(
        "ssh_sources", "dns_cidrs", "ldap_cidrs", "slurmctld_cidrs", "egress_cidrs", "blocked_cidrs"
    )
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        from sup.targets.kube.values import cidr

        return [cidr(v) for v in value]

    @field_validator("ldap_ports", "slurmctld_ports")
    @classmethod
    def _ports(cls, value: list[int]) -> list[int]:
        for port in value:
            if not 1 <= port <= 65535:
                raise ValueError(f"port {port} is not between 1 and 65535")
        return value

    @field_validator("group_pods")
    @classmethod
    def _groups(cls, value: list[str]) -> list[str]:
        for name in value:
            check_name(name, kind="group in group_pods")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> KubeSettings:
        from sup.targets.kube.values import overlaps, parse_quantity

        for limit, request in (("cpu", self.cpu_request), ("memory", self.memory_request)):
            if request is not None and parse_quantity(request) > parse_quantity(getattr(self, limit)):
                raise ValueError(f"{limit}_request {request} is more than {limit} {getattr(self, limit)}")
        allowed = self.dns_cidrs + self.ldap_cidrs + self.slurmctld_cidrs + self.egress_cidrs
        for blocked in self.blocked_cidrs:
            for network in allowed:
                if overlaps(blocked, network) and not _strictly_inside(blocked, network):
                    raise ValueError(
                        f"egress CIDR {network} covers all of blocked_cidrs {blocked}: the blocked "
                        "address cannot be carved out of it; remove it or narrow blocked_cidrs"
                    )
        return self


def _strictly_inside(inner: str, outer: str) -> bool:
    from sup.targets.kube.values import inside

    return inside(inner, outer)


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
    allow_insecure_http: bool = Field(
        False,
        description="accept plain-http issuer and JWKS URLs (a test realm on loopback); never in production",
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


class SourcePolicy(_Section):
    """Which source may change what another source owns (settings key `sources`)."""

    precedence: list[str] = Field(
        default_factory=list,
        description="sources, strongest first (`keycloak`, `scim:NAME` or `scim:*`, `api`, `import`): a "
        "source may take over a user or group owned by a source listed after it; a source not listed "
        "never takes over anything (the conflict is reported instead)",
    )

    def may_take_over(self, taker: str, owner: str) -> bool:
        """Whether `taker` may rewrite (and so own) what `owner` holds (sup/domain/ownership.py)."""
        return ownership.may_take_over(self.precedence, taker, owner)


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


class Settings(BaseSettings):
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
    ldap: LdapSettings | None = None
    slurm: SlurmSettings | None = None
    kube: KubeSettings | None = None
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
        return getattr(self, target) is not None

    def reserved_names(self) -> frozenset[str]:
        return frozenset(self.accounts.extra_reserved_names) | self.naming.extra_reserved


def load_settings(**overrides: Any) -> Settings:
    """Settings from SUP_CONFIG and the environment; keyword overrides win (used by tests and the CLI)."""
    return Settings(**overrides)
