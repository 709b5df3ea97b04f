"""What SUP's SCIM service is: its resources, its announced capabilities and its tolerance policy.

/ServiceProviderConfig (RFC 7643 §5) is built from the settings, and announces exactly what works:
PATCH, bulk (when `scim.bulk_max_operations` > 0), filters (the whole RFC 7644 §3.4.2.2 grammar, run
in SQL) with `maxResults`, sorting, ETags; no password change (SUP users log in with SSH keys);
bearer tokens. Paging is by index (`startIndex`, `count`), which is what a document without RFC
9865's `pagination` says (see `served_config`).
"""

from __future__ import annotations

from scim2_models import (
    AuthenticationScheme,
    Bulk,
    ChangePassword,
    ETag,
    Filter,
    Group,
    Pagination,
    Patch,
    ScimPolicy,
    ScimProvider,
    ServiceProviderConfig,
    Sort,
    User,
)
from scim2_server.responses import ScimResponse

from sup.config import Settings
from sup.scim.schemas import EnterpriseUser, SupUser, group_resource_type, user_resource_type

# What IdPs send that a strict reading refuses (see docs/identity-providers.md, "SCIM"): Entra ID
# removes members with `"value": [...]` on a `remove`, and adds `emails[type eq "work"].value` when
# there is no such email.
# Capitalised ops, "True"/"False" strings and dotted path-less keys need no setting.
IDP_POLICY = ScimPolicy(
    unknown=ScimPolicy.Unknown.ignore,
    remove_value_as_filter=ScimPolicy.RemoveValue.apply,
    unmatched_path_filter=ScimPolicy.UnmatchedPathFilter.create,
)


def bulk_payload_limit(settings: Settings) -> int:
    """bulk.maxPayloadSize: the configured size, never above the API's own body limit."""
    return min(settings.scim.bulk_max_payload_bytes, settings.api.max_body_bytes)


def service_provider_config(settings: Settings) -> ServiceProviderConfig:
    scim = settings.scim
    bulk_on = scim.bulk_max_operations > 0
    # No documentationUri (optional, RFC 7643 section 5): SUP has no public site to name, and a
    # site's own help page is not known here.
    return ServiceProviderConfig(
        patch=Patch(supported=True),
        bulk=Bulk(
            supported=bulk_on,
            max_operations=scim.bulk_max_operations,
            max_payload_size=bulk_payload_limit(settings) if bulk_on else 0,
        ),
        filter=Filter(supported=True, max_results=scim.max_results),
        change_password=ChangePassword(supported=False),
        sort=Sort(supported=True),
        etag=ETag(supported=True),
        pagination=Pagination(
            cursor=False,
            index=True,
            default_pagination_method=Pagination.DefaultPaginationMethod.index,
            default_page_size=min(scim.default_page_size, scim.max_results),
            max_page_size=scim.max_results,
        ),
        authentication_schemes=[
            AuthenticationScheme(
                type=AuthenticationScheme.Type.oauthbearertoken,
                name="Bearer token",
                description="A token from `sup token create --role scim --name CONNECTION`, one per IdP "
                "connection, sent as `Authorization: Bearer TOKEN`",
                primary=True,
            )
        ],
    )


def served_config(response: ScimResponse) -> ScimResponse:
    """/ServiceProviderConfig as served: without RFC 9865's `pagination`, which scim2-server reads
    (the default page size and the cursor switch) but which is not an RFC 7643 attribute. SUP pages
    by index only, what a client assumes when the attribute is absent, and clients that validate
    strictly (scim2-models 0.6, for one) reject a whole document holding an attribute they do not
    know, and push nothing."""
    if response.body is not None:
        response.body.pop("pagination", None)
    return response


def build_provider(settings: Settings) -> ScimProvider:
    return ScimProvider(
        models=[User, EnterpriseUser, SupUser, Group],
        resource_types=[user_resource_type(), group_resource_type()],
        config=service_provider_config(settings),
        policy=IDP_POLICY,
    )
