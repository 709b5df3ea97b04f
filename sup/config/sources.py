"""The sources: the Keycloak pull (`keycloak`) and which source may take over what another owns
(`sources`)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from sup.common.sections import Section
from sup.domain import ownership, privilege


class KeycloakSettings(Section):
    """The Keycloak source (settings key `keycloak`): SUP pulls users, groups and memberships from a
    realm with a confidential client's service account (client_credentials). The account needs the
    realm-management roles view-users, query-users, query-groups (and view-events for `admin_events`).
    The user attributes read (`*_attribute`) must be declared in the realm's user profile: Keycloak
    24+ drops undeclared attributes. Setting up the realm: docs/identity-providers.md.
    """

    url: str = Field(description="Keycloak's base URL (no /realms/...)", examples=["https://sso.example.org"])
    realm: str = Field(min_length=1, description="the realm SUP pulls from", examples=["research"])
    client_id: str = Field(
        min_length=1,
        description="a confidential client whose service account holds the realm-management roles above",
        examples=["sup"],
    )
    client_secret: SecretStr = Field(description="that client's secret")
    interval_seconds: int = Field(
        900, ge=0, description="seconds between scheduled full pulls in `sup serve`; 0: only on demand"
    )
    admin_events: bool = Field(
        True,
        description="between full pulls, read the realm's admin events (USER, GROUP, GROUP_MEMBERSHIP) "
        "every events_seconds and re-read only what they name; needs admin events on in the realm",
    )
    events_seconds: float = Field(30, ge=1, description="seconds between admin-event reads")
    page_size: int = Field(
        500,
        ge=1,
        le=5000,
        description="users, groups or members per request (member lists: at least 5000)",
    )
    timeout_seconds: int = Field(30, ge=1, le=600, description="per-request timeout")
    read_concurrency: int = Field(
        4,
        ge=1,
        le=16,
        description="requests in flight at once while a full pull reads user pages and member lists "
        "(1: one after the other)",
    )
    verify_tls: bool = Field(
        True,
        description="verify Keycloak's TLS certificate; false: a test realm only (ca_file set: verified)",
    )
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
    path_separator: Literal["-", "_", "."] = Field(
        "-", description="joins the parts of a path with group_names `path`"
    )
    flatten_subgroups: bool = Field(
        False,
        description="members of a group's subgroups (at any depth, within groups_path) are members of "
        "the group too; off: a group holds only its direct members in Keycloak",
    )
    ssh_key_attribute: str = Field(
        "sshPublicKey",
        description="user attribute holding OpenSSH keys",
    )
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


class SourcePolicy(Section):
    """Which source may change what another source owns (settings key `sources`). A source is
    `keycloak`, `scim:NAME` (one SCIM connection, `scim:*` for every one), `api` or `import`."""

    precedence: list[str] = Field(
        default_factory=list,
        description="sources, strongest first: a source may take over a user or group owned by a source "
        "listed after it; a source not listed never takes over anything (the conflict is reported "
        "instead)",
        examples=[["keycloak", "scim:*", "api"]],
    )

    privileged_group_writers: list[str] = Field(
        default_factory=lambda: list(privilege.DEFAULT_WRITERS),
        description="sources that may create a privileged group (a target's admin group, a Slurm "
        "account's coordinator group) or add members to one; the others get 403 (SCIM) or an error "
        "(Keycloak, import). Default: only an operator; add e.g. `keycloak` or `scim:okta` if your "
        "identity provider manages them",
    )

    def may_write_privileged(self, source: str) -> bool:
        """Whether `source` may create or fill a privileged group (sup/domain/privilege.py)."""
        return privilege.may_write_privileged(self.privileged_group_writers, source)

    def may_take_over(self, taker: str, owner: str) -> bool:
        """Whether `taker` may rewrite (and so own) what `owner` holds (sup/domain/ownership.py)."""
        return ownership.may_take_over(self.precedence, taker, owner)
