"""A strict, older SCIM client against a live SUP: scim2-client 0.6 on scim2-models 0.6.

Run by tests/scim/test_conformance.py with the Python of a venv of its own (those versions are not
SUP's: scim2-models 0.6 forbids any attribute its models do not declare, where later versions
ignore them), so this file imports nothing of SUP's or the tests'. Usage:

    python check.py SCIM_URL TOKEN

Prints one JSON object: what the client saw at each step. Exits non-zero, with the client's own
error on stderr, at the first step it refuses.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx
from scim2_client.engines.httpx import SyncSCIMClient
from scim2_models import Context, Schema, SearchRequest, ServiceProviderConfig

ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"


def main(url: str, token: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    client = SyncSCIMClient(http)

    # Discovery, each document validated strictly (an attribute the models do not know is an error).
    client.discover()
    config = client.service_provider_config
    assert isinstance(config, ServiceProviderConfig)
    seen["config"] = config.model_dump(exclude_none=True)
    schemas = client.query(Schema)
    seen["schema_names"] = {s.id: s.name for s in schemas.resources}
    user_model = client.get_resource_model("User")
    group_model = client.get_resource_model("Group")
    assert user_model is not None and group_model is not None
    # The enterprise extension as a client finds it: by RFC 7643's name.
    extensions = {e.__name__: e for e in user_model.get_extension_models().values()}
    seen["user_extensions"] = sorted(extensions)
    enterprise = extensions["EnterpriseUser"]

    # Create, with the enterprise extension's attributes.
    user = user_model(
        user_name="strict.client@corp.example",
        display_name="Strict Client",
        external_id="strict-1",
        emails=[{"value": "strict.client@corp.example", "type": "work", "primary": True}],
    )
    user[enterprise] = enterprise(
        employee_number="E-1001", organization="Research", department="GPU Platform"
    )
    created = client.create(user)
    seen["created"] = created.model_dump(exclude_none=True)
    user_id = created.id

    # Replace the whole user as an IdP's PUT does: read-only attributes (id, meta, groups) and a
    # password hash included. The payload goes as written (the client's own checks would strip
    # them); the answer is still validated.
    whole = dict(seen["created"])
    whole.update(
        {
            "displayName": "Strict Client Renamed",
            "password": "{SSHA}dGhpcyBpcyBub3QgYSByZWFsIGhhc2g=",
            "groups": [],
        }
    )
    answer = http.put(f"/Users/{user_id}", json=whole, headers={"Content-Type": "application/scim+json"})
    seen["replace_status"] = answer.status_code
    replaced = user_model.model_validate(answer.json(), scim_ctx=Context.RESOURCE_REPLACEMENT_RESPONSE)
    seen["replaced"] = replaced.model_dump(exclude_none=True)
    seen["replaced_raw_keys"] = sorted(answer.json())
    seen["queried_after_replace"] = client.query(user_model, user_id).model_dump(exclude_none=True)

    patched = client.modify(
        user_model,
        user_id,
        {"schemas": [PATCH], "Operations": [{"op": "replace", "path": "title", "value": "Engineer"}]},
        check_request_payload=False,
    )
    seen["patched"] = None if patched is None else patched.model_dump(exclude_none=True)

    group = client.create(group_model(display_name="strict-lab"))
    seen["group_created"] = group.model_dump(exclude_none=True)
    client.modify(
        group_model,
        group.id,
        {"schemas": [PATCH], "Operations": [{"op": "add", "path": "members", "value": [{"value": user_id}]}]},
        check_request_payload=False,
    )
    seen["group_with_member"] = client.query(group_model, group.id).model_dump(exclude_none=True)
    client.modify(
        group_model,
        group.id,
        {
            "schemas": [PATCH],
            "Operations": [{"op": "remove", "path": f'members[value eq "{user_id}"]'}],
        },
        check_request_payload=False,
    )
    seen["group_without_member"] = client.query(group_model, group.id).model_dump(exclude_none=True)
    found = client.query(  # a filtered GET: the ListResponse, validated too
        user_model, query_parameters=SearchRequest(filter='userName eq "strict.client@corp.example"')
    )
    seen["users_found"] = found.total_results

    client.delete(group_model, group.id)
    client.delete(user_model, user_id)
    gone = client.query(user_model, user_id, raise_scim_errors=False)
    seen["status_after_delete"] = getattr(gone, "status", None)
    return seen


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2]), default=str))
