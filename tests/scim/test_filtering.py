"""SUP's SCIM filters in SQL (sup/scim/filtering/), at the storage, beyond what the HTTP tests show."""

from __future__ import annotations

from typing import Any

import pytest
from scim2_models import ResourceType
from scim2_server.testing import ScimStorageContract
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.scim.provider import build_provider
from sup.scim.storage import SqlStorage
from sup.store.audit import Actor


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("members.value pr", {"physics"}),
        ("members.type pr", {"physics"}),
        ("members[value pr]", {"physics"}),
        ("members pr", {"physics"}),
        ("groups.value pr", {"ann"}),
        ("groups.display pr", {"ann"}),
        ("emails.type pr", {"ann"}),
        ("emails.display pr", set()),
    ],
)
def test_present_on_a_sub_attribute_means_some_element_has_it(
    sessions: sessionmaker[Session], settings: Settings, expression: str, expected: set[str]
) -> None:
    """`members.value pr` is `members[value pr]` (RFC 7644 §3.4.2.2), wherever the elements live."""
    provider = build_provider(settings)
    types: dict[str, ResourceType] = {str(rt.id): rt for rt in provider.resource_types}
    user_model: Any = provider.model_for(types["User"])
    group_model: Any = provider.model_for(types["Group"])
    with sessions.begin() as session:
        storage = SqlStorage(session, settings, Actor(name="okta", role="scim"), "okta")
        ann = storage.create(
            types["User"], user_model(user_name="ann", emails=[{"value": "ann@corp.example", "type": "work"}])
        )
        storage.create(types["User"], user_model(user_name="bob"))
        storage.create(types["Group"], group_model(display_name="physics", members=[{"value": ann.id}]))
        storage.create(types["Group"], group_model(display_name="empty"))
        model, resource_type = (
            (group_model, types["Group"]) if expression.startswith("members") else (user_model, types["User"])
        )
        search = ScimStorageContract.search_request([model], filter=expression)
        page = ScimStorageContract.search(storage, [resource_type], search)
    names = {r.display_name if expression.startswith("members") else r.user_name for r in page.resources}
    assert names == expected
