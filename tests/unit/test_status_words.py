"""The status words are an interface: the store's `target_status.state` column, the API's JSON and
`sup plan --json` hold these exact strings, so an enum member renamed or retyped must fail here."""

from __future__ import annotations

import json

from sup.domain.status import PassState, SyncState
from sup.users.status import TargetState


def test_sync_state_values_are_the_stored_words() -> None:
    assert [s.value for s in SyncState] == ["disabled", "pending", "in_sync", "error"]


def test_pass_state_values_are_the_printed_words() -> None:
    assert [s.value for s in PassState] == ["disabled", "planned", "refused", "applied", "partial", "error"]


def test_members_print_and_serialise_as_the_plain_word() -> None:
    assert f"{SyncState.IN_SYNC}" == "in_sync"
    assert json.dumps({"state": PassState.PARTIAL}) == '{"state": "partial"}'
    assert SyncState("error") is SyncState.ERROR


def test_api_state_is_the_enum_with_the_same_values() -> None:
    schema = TargetState.model_json_schema()
    assert schema["$defs"]["SyncState"]["enum"] == ["disabled", "pending", "in_sync", "error"]
    assert TargetState(target="ldap", state="in_sync").model_dump(mode="json")["state"] == "in_sync"
