"""Who the Keycloak source is in the store (its source name and audit actor), and the POSIX names of
Keycloak users and groups (the `naming` rules and keycloak.group_names)."""

from __future__ import annotations

from sup.config import KeycloakSettings, Settings
from sup.domain.usernames import derive_username
from sup.sources.keycloak.reader import KcGroup, KcUser
from sup.store.audit import Actor

SOURCE = "keycloak"
ACTOR = Actor(name="source:keycloak", role="admin")


def username_of(settings: Settings, kc: KcUser) -> str:
    return derive_username(kc.username, settings.naming)


def group_name_of(settings: Settings, group: KcGroup) -> str:
    kc = keycloak_settings(settings)
    if kc.group_names == "name":
        text = group.name
    else:
        root = kc.groups_path
        rest = group.path if root == "/" else group.path[len(root) :]
        parts = [p for p in rest.split("/") if p] or [group.name]
        text = kc.path_separator.join(parts)
    return derive_username(text, settings.naming.model_copy(update={"strategy": "full"}), overlong="hash")


def keycloak_settings(settings: Settings) -> KeycloakSettings:
    if settings.keycloak is None:
        raise RuntimeError("the Keycloak source is not configured")
    return settings.keycloak
