"""The SCIM resources SUP serves, and the SUP extension schema (RFC 7643 §3.3, §8.7).

- `User` with the enterprise extension (RFC 7643 §4.3) and the SUP extension below, at /Users;
- `Group` (RFC 7643 §4.2) at /Groups.

The SUP extension, `urn:ietf:params:scim:schemas:extension:sup:2.0:User`, carries the POSIX and
cluster attributes an IdP may send or read back. The URN follows the form Entra ID and Okta expect of
custom extensions (`urn:ietf:params:scim:schemas:extension:NAME:2.0:User`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field
from scim2_models import (
    URN,
    CaseExact,
    ComplexAttribute,
    Extension,
    Group,
    Mutability,
    Reference,
    ResourceType,
    User,
)
from scim2_models import EnterpriseUser as Rfc7643EnterpriseUser

SUP_USER_SCHEMA = "urn:ietf:params:scim:schemas:extension:sup:2.0:User"
ENTERPRISE_USER_SCHEMA = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
CORE_USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"
CORE_GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group"


class SupUser(Extension):
    """POSIX and cluster attributes of a SUP user."""

    __schema__ = URN(SUP_USER_SCHEMA)

    username: Annotated[str | None, Mutability.read_only, CaseExact.true] = Field(
        None,
        description="The POSIX username SUP derived from userName (read-only; it follows userName).",
    )
    uid_number: int | None = Field(
        None,
        description="POSIX uid. Honoured on creation if inside SUP's policy and never used; "
        "otherwise allocated. Never reused after deletion.",
    )
    gid_number: int | None = Field(
        None,
        description="Primary gid: the gid of the user's private group (it equals the uid by default).",
    )
    login_shell: str | None = Field(
        None, description="Login shell; one of SUP's allowed shells (accounts.allowed_shells)."
    )
    home_directory: str | None = Field(
        None, description="Home directory; by default from SUP's accounts.home_template."
    )
    ssh_public_keys: list[str] | None = Field(
        None,
        description="OpenSSH public keys, one per value (ed25519, ECDSA, RSA >= 2048 bits, sk- keys).",
    )


def _manager_from_string(value: Any) -> Any:
    """Entra ID sends `manager` as the manager's id, a plain string (RFC 7643 §4.3: a complex value)."""
    return {"value": value} if isinstance(value, str) else value


class Manager(ComplexAttribute):
    """RFC 7643 §4.3 `manager`; `$ref` is optional here because IdPs send the id alone."""

    value: Annotated[str | None, CaseExact.true] = Field(
        None, description="The id of the SCIM resource representing the User's manager."
    )
    ref: Reference[User[Any]] | None = Field(
        None, serialization_alias="$ref", validation_alias="$ref", description="The manager's URI."
    )
    display_name: Annotated[str | None, Mutability.read_only] = Field(
        None, description="The displayName of the User's manager."
    )


# The enterprise extension of RFC 7643 §4.3, accepting `manager` as a plain id string as Entra ID
# sends it. Its class name and docstring are what /Schemas serves as the schema's `name` and
# `description` (scim2-models takes them from the class): RFC 7643 §8.7.1's "EnterpriseUser" and
# "Enterprise User", which clients look the extension up by.
class EnterpriseUser(Rfc7643EnterpriseUser):
    """Enterprise User"""

    manager: Annotated[Manager | None, BeforeValidator(_manager_from_string)] = None  # type: ignore[assignment]


ScimUser = User[EnterpriseUser | SupUser]
"""The User resource SUP serves, with both extensions."""


def user_resource_type() -> ResourceType:
    resource_type = ResourceType.from_resource(ScimUser)
    resource_type.description = "A person: a POSIX account, Slurm associations and a home on the cluster"
    return resource_type


def group_resource_type() -> ResourceType:
    resource_type = ResourceType.from_resource(Group)
    resource_type.description = "A POSIX group (user-private groups are not shown)"
    return resource_type


__all__ = [
    "CORE_GROUP_SCHEMA",
    "CORE_USER_SCHEMA",
    "ENTERPRISE_USER_SCHEMA",
    "SUP_USER_SCHEMA",
    "EnterpriseUser",
    "Group",
    "ScimUser",
    "SupUser",
    "group_resource_type",
    "user_resource_type",
]
