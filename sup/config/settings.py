"""`Settings`: every section, composed with one optional section per registered target, and
`load_settings`.

Read from the environment (`SUP_*`, nested keys joined with `__`, e.g. `SUP_LDAP__URL`) and, when
`SUP_CONFIG` names a YAML file, from that file (the same keys, nested). The environment wins over the
file. A target whose section is absent is disabled; a section that is present must be complete.
Secrets are `SecretStr`: they never show in reprs, logs or error messages.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from pydantic import BaseModel, Field, create_model, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from sup.config.accounts import AccessPolicy, AccountPolicy
from sup.config.api import ApiSettings, LogSettings, OidcSettings, ScimSettings
from sup.config.audit_out import AuditOutSettings
from sup.config.gateway import GatewaySettings
from sup.config.home_dirs import HomeDirsSettings
from sup.config.ids import IdPolicy
from sup.config.reconcile import LifecycleSettings, ReconcileSettings
from sup.config.sources import KeycloakSettings, SourcePolicy
from sup.config.ssh_ca import SshCaSettings
from sup.domain.gids import uid_ranges
from sup.domain.usernames import UsernameRule
from sup.targets.registry import SPECS, TargetSections
from sup.targets.spec import TargetSpec

S = TypeVar("S", bound=BaseModel)


class SettingsBase(BaseSettings):
    """Every section but the targets'; `Settings` adds one optional section per registered target."""

    model_config = SettingsConfigDict(
        env_prefix="SUP_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    database_url: str = Field(
        "sqlite:///sup.db",
        description="the store: an SQLAlchemy URL, PostgreSQL or a SQLite file",
        examples=["postgresql://sup:PASSWORD@db.example.org/sup"],
    )
    ids: IdPolicy = IdPolicy()
    accounts: AccountPolicy = AccountPolicy()
    naming: UsernameRule = UsernameRule()
    api: ApiSettings = ApiSettings()
    log: LogSettings = LogSettings()
    access: AccessPolicy = AccessPolicy()
    keycloak: KeycloakSettings | None = None
    oidc: OidcSettings | None = None
    ssh_ca: SshCaSettings | None = None  # absent: SUP signs no SSH certificates
    sources: SourcePolicy = SourcePolicy()
    reconcile: ReconcileSettings = ReconcileSettings()
    lifecycle: LifecycleSettings = LifecycleSettings()
    scim: ScimSettings = ScimSettings()
    gateway: GatewaySettings | None = None  # absent: no SSH gateway, login pods never sleep
    home_dirs: HomeDirsSettings | None = None  # `sup homes serve` only (docs/homes.md)
    audit_out: AuditOutSettings | None = None  # absent: the audit log is not shipped anywhere

    # The target specs this class has a section for (set by _compose).
    target_specs: ClassVar[tuple[TargetSpec[Any], ...]] = ()

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

    @model_validator(mode="after")
    def _reserved_uids(self) -> SettingsBase:
        """A uid a target runs its own processes as (TargetSpec.reserved_uids) lies outside every uid
        range SUP gives people from: otherwise a person could be given it."""
        ranges = uid_ranges(self.ids)
        for spec in self.target_specs:
            section = getattr(self, spec.name, None)
            if section is None or spec.reserved_uids is None:
                continue
            for uid in sorted(spec.reserved_uids(section)):
                for taken in ranges:
                    if uid in taken:
                        raise ValueError(
                            f"{spec.name} runs a process as uid {uid}, which lies in SUP's uid range "
                            f"{taken} (ids.uid_range, ids.supplied_uid_ranges): a person could be given "
                            "it; choose a uid outside them"
                        )
        return self

    def reserved_names(self) -> frozenset[str]:
        return frozenset(self.accounts.extra_reserved_names) | self.naming.extra_reserved

    def privileged_groups(self) -> frozenset[str]:
        """The groups the enabled targets give power (admin groups: sudo, a Slurm AdminLevel), as
        their specs say; accounts' coordinator groups come from the store (sup/groups/privilege.py)."""
        names: set[str] = set()
        for spec in self.target_specs:
            section = self.target_settings(spec)
            if section is not None and spec.privileged_groups is not None:
                names |= spec.privileged_groups(section)
        return frozenset(names)


def _compose(base: type[SettingsBase], specs: Sequence[TargetSpec[Any]]) -> type[SettingsBase]:
    """`base` with one optional section per target spec, keyed by the spec's name (SUP_<NAME>__*)."""
    sections: dict[str, Any] = {spec.name: (spec.settings_model | None, None) for spec in specs}
    model = create_model("Settings", __base__=base, __module__=__name__, **sections)
    model.target_specs = tuple(specs)
    return model


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
