"""Settings and policy, one module per seam:

settings.py   Settings (every section, plus one per registered target) and load_settings
ids.py        IdPolicy (`ids`); the ranges themselves are domain values (sup/domain/ids.py)
accounts.py   AccountPolicy (`accounts`), AccessPolicy (`access`)
api.py        ApiSettings, RateLimit (`api`), LogSettings (`log`), OidcSettings (`oidc`),
              ScimSettings (`scim`)
sources.py    KeycloakSettings (`keycloak`), SourcePolicy (`sources`)
gateway.py    GatewaySettings (`gateway`: the SSH gateway, login pods' sleep)
audit_out.py  AuditOutSettings (`audit_out`: the audit stream's file and webhook sinks)
reconcile.py  ReconcileSettings (`reconcile`), LifecycleSettings (`lifecycle`)
reference.py  docs/configuration.md rendered from the models (scripts/gen-config-docs)
describe.py   one setting's type, bounds and default in words, for reference.py

The targets' sections live in their packages (sup/targets/<name>/settings.py) and are composed into
Settings from the registry (sup/targets/registry.py).
"""

from sup.config.accounts import AccessPolicy, AccountPolicy
from sup.config.api import (
    ApiSettings,
    LogSettings,
    OidcRole,
    OidcSettings,
    RateLimit,
    ScimOAuthConnection,
    ScimRateLimit,
    ScimSettings,
)
from sup.config.audit_out import AuditFileSink, AuditOutSettings, AuditWebhookSink
from sup.config.gateway import GatewaySettings
from sup.config.ids import IdPolicy
from sup.config.reconcile import LifecycleSettings, ReconcileSettings
from sup.config.settings import Settings, SettingsBase, load_settings
from sup.config.sources import KeycloakSettings, SourcePolicy
from sup.domain.ids import FORBIDDEN_IDS, MAX_ID, IdRange

__all__ = [
    "FORBIDDEN_IDS",
    "MAX_ID",
    "AccessPolicy",
    "AccountPolicy",
    "ApiSettings",
    "AuditFileSink",
    "AuditOutSettings",
    "AuditWebhookSink",
    "GatewaySettings",
    "IdPolicy",
    "IdRange",
    "KeycloakSettings",
    "LifecycleSettings",
    "LogSettings",
    "OidcRole",
    "OidcSettings",
    "RateLimit",
    "ReconcileSettings",
    "ScimOAuthConnection",
    "ScimRateLimit",
    "ScimSettings",
    "Settings",
    "SettingsBase",
    "SourcePolicy",
    "load_settings",
]
