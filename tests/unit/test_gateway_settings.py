"""The `gateway` settings section and the `gateway` token role (pure)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sup.config import GatewaySettings, Settings
from sup.domain.roles import Role, role_allows


def test_no_gateway_section_means_no_gateway_and_pods_never_sleep() -> None:
    settings = Settings(database_url="sqlite://")
    assert settings.gateway is None


def test_the_defaults_are_the_documented_ones_and_pods_sleep_only_with_idle_seconds() -> None:
    section = Settings(database_url="sqlite://", gateway={}).gateway
    assert section is not None
    assert (section.listen_port, section.route_cache_seconds, section.heartbeat_seconds) == (2222, 5, 15)
    assert (section.idle_seconds, section.max_awake_hours, section.sleeps) == (None, None, False)
    assert GatewaySettings(idle_seconds=900).sleeps is True


def test_the_environment_sets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUP_GATEWAY__IDLE_SECONDS", "1800")
    section = Settings(database_url="sqlite://").gateway
    assert section is not None and section.idle_seconds == 1800


@pytest.mark.parametrize("values", [{"idle_seconds": 0}, {"heartbeat_seconds": 0}, {"idle_secs": 60}])
def test_nonsense_is_refused(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        GatewaySettings.model_validate(values)


def test_a_gateway_token_stands_apart_from_the_ladder() -> None:
    assert role_allows("gateway", Role.gateway) and role_allows("admin", Role.gateway)
    for role in ("viewer", "operator", "scim"):
        assert not role_allows(role, Role.gateway)
    for needed in (Role.viewer, Role.operator, Role.admin, Role.scim):
        assert not role_allows("gateway", needed)
