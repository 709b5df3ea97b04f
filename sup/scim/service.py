"""scim2-server's protocol core, with SUP's two departures from its defaults.

- Request bodies: the legacy core URN `urn:scim:schemas:core:2.0` that OneLogin has sent stands for
  the resource's core schema (RFC 7643 §8.7.1 names only the `urn:ietf:params:...` form).
- PUT (RFC 7644 §3.5.1: omitted attributes "MAY" keep a default): the SUP extension's attributes a
  replacement leaves out keep their values. IdPs that manage POSIX attributes send them; the others
  (most) would otherwise wipe SSH keys an administrator added, or reset a uid they never knew about.
  An explicit null, or a PATCH `remove`, still clears a key list or resets a shell or home.

It also refuses a search's filter over `MAX_FILTER_LENGTH` before parsing it
(sup/scim/filtering/limits.py): 400 `invalidFilter`.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_core import from_json
from scim2_models import Context, InvalidSyntaxException, Resource, ResourceType, SearchRequest
from scim2_server.conditions import Conditions
from scim2_server.handler import ScimHandler
from scim2_server.service import ModelT, ScimService, scim_exception_of

from sup.scim.filtering import check_filter_length
from sup.scim.mapping import USER
from sup.scim.schemas import SupUser

LEGACY_CORE_SCHEMAS = frozenset({"urn:scim:schemas:core:2.0", "urn:scim:schemas:core:1.0"})


class SupScimService(ScimService):
    def read_body(
        self, model: type[ModelT], body: bytes, content_type: str | None, scim_ctx: Context
    ) -> ModelT:
        self.ensure_json(content_type)
        try:
            payload = from_json(body)
        except ValueError as exc:
            raise InvalidSyntaxException(detail=f"the request body is not valid JSON: {exc}") from exc
        payload = _modern_schemas(payload, getattr(model, "__schema__", None))
        try:
            return model.model_validate(payload, scim_ctx=scim_ctx)
        except ValidationError as exc:
            raise scim_exception_of(exc) from exc

    def read_search(self, resource_types: list[ResourceType], payload: Any) -> tuple[SearchRequest[Any], Any]:
        """A search request (query parameters or a `.search` body), its filter within the length cap."""
        if isinstance(payload, dict):
            for key, value in payload.items():
                if isinstance(key, str) and key.casefold() == "filter" and isinstance(value, str):
                    check_filter_length(value)
        return super().read_search(resource_types, payload)


def _modern_schemas(payload: Any, schema: Any) -> Any:
    if not isinstance(payload, dict) or schema is None:
        return payload
    schemas = payload.get("schemas")
    if isinstance(schemas, list) and any(s in LEGACY_CORE_SCHEMAS for s in schemas):
        payload = {**payload, "schemas": [str(schema) if s in LEGACY_CORE_SCHEMAS else s for s in schemas]}
    return payload


class SupScimHandler(ScimHandler):
    def replace_resource(
        self,
        resource_type: ResourceType,
        current: Resource[Any],
        replacement: Resource[Any],
        conditions: Conditions,
    ) -> Resource[Any]:
        if resource_type.name == USER:
            _keep_posix_attributes(current, replacement)
        return super().replace_resource(resource_type, current, replacement, conditions)


def _keep_posix_attributes(current: Resource[Any], replacement: Resource[Any]) -> None:
    kept: SupUser | None = current[SupUser]
    if kept is None:
        return
    given: SupUser | None = replacement[SupUser]
    if given is None:
        replacement[SupUser] = kept.model_copy()
        return
    for name in SupUser.model_fields:
        if name != "schemas" and name not in given.model_fields_set:
            setattr(given, name, getattr(kept, name))
