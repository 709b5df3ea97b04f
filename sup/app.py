"""The composition root: the FastAPI application (admin API under /api/v1, SCIM under /scim/v2, health
endpoints, OpenAPI at /docs) wired with every feature's router, the reconciler, the Keycloak puller
and the audit stream.

It sits above every feature package: nothing in sup/ but the CLI imports it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy import Engine

from sup import __version__
from sup.admin.router import router as admin_router
from sup.api import API_PREFIX, errors
from sup.api.health import router as health_router
from sup.api.middleware import (
    BodyLimitMiddleware,
    MetricsMiddleware,
    RequestIdMiddleware,
    WriteRateLimitMiddleware,
)
from sup.api.oidc import OidcVerifier
from sup.api.token_cache import TokenCache
from sup.audit.router import router as audit_router
from sup.audit.ship import AuditStream
from sup.config import Settings
from sup.groups.router import router as groups_router
from sup.logins.router import router as logins_router
from sup.me.router import router as me_router
from sup.reconcile.router import router as reconcile_router
from sup.reconcile.worker import Reconciler
from sup.scim.errors import SCIM_PREFIX, error_response
from sup.scim.router import router as scim_router
from sup.slurm_accounts.router import router as slurm_router
from sup.sources.keycloak.router import router as sources_router
from sup.sources.keycloak.scheduler import KeycloakPuller
from sup.ssh_ca.router import router as ssh_ca_router
from sup.ssh_ca.service import SshCa
from sup.store.session import make_engine, make_sessionmaker
from sup.tokens.router import router as tokens_router
from sup.tokens.router import whoami_router
from sup.users.router import router as users_router
from sup.users.router import status_router as user_status_router

DESCRIPTION = """
SUP provisions people and groups from an identity provider into LDAP, Slurm accounting and
Kubernetes. Every endpoint but /healthz, /readyz and /metrics needs `Authorization: Bearer TOKEN`
(`sup token create --name N --role admin|operator|viewer|scim|gateway`). Errors are problem+json bodies
whose `errors` list names each offending field. Updates accept `If-Match` with the ETag of a read.
"""


def create_app(settings: Settings, engine: Engine | None = None, *, reconciler: bool = False) -> FastAPI:
    """The app; with `reconciler`, it also runs the background reconciler while it serves."""
    engine = engine or make_engine(settings.database_url)
    worker = Reconciler(settings, engine) if reconciler else None
    # The Keycloak pull runs where the reconciler leads (one replica), beside it.
    puller = (
        KeycloakPuller(settings, engine, is_leader=lambda: worker.lease.leading)
        if worker is not None and settings.keycloak is not None
        else None
    )
    # The audit stream ships beside the reconciler too (one per `sup serve`; a lock makes it one
    # across replicas).
    stream = (
        AuditStream(settings.audit_out, engine)
        if worker is not None and settings.audit_out is not None
        else None
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if worker is not None:
            worker.start()
        if puller is not None:
            puller.start()
        if stream is not None:
            stream.start()
        try:
            yield
        finally:
            if stream is not None:
                stream.stop()
            if puller is not None:
                puller.stop()
            if worker is not None:
                worker.stop()

    app = FastAPI(
        title="SUP", version=__version__, description=DESCRIPTION, docs_url="/docs", lifespan=lifespan
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessions = make_sessionmaker(engine)
    app.state.reconciler = worker
    app.state.oidc = OidcVerifier(settings.oidc) if settings.oidc is not None else None
    # The CA's key is read once, here: a missing or unusable key stops `sup serve` at startup.
    app.state.ssh_ca = SshCa(settings.ssh_ca) if settings.ssh_ca is not None else None
    app.state.token_cache = TokenCache()  # successful bearer lookups, 5 s (sup/api/token_cache.py)

    # Each router carries its full path (API_PREFIX included): route templates in metrics stay exact.
    # A request is matched against the routes in this order: SCIM first, the most frequent (an IdP
    # looks each person up on every sync cycle) and under a prefix no other router uses.
    routers = (
        scim_router,
        users_router,
        user_status_router,
        groups_router,
        slurm_router,
        reconcile_router,
        tokens_router,
        whoami_router,
        audit_router,
        health_router,
        sources_router,
        me_router,
        admin_router,
        logins_router,
        ssh_ca_router,
    )
    for router in routers:
        app.include_router(router)
    errors.install(app)

    # Added last = outermost: request id first, so every other layer (and every error) can use it.
    app.add_middleware(MetricsMiddleware)
    # The SSH gateway writes an audit event per connection (50 a second at its capacity goal) and
    # heartbeats: its endpoints get their own limit, still applied per client before authentication.
    # Its audit events have a budget of their own: a key holder looping logins (an event each) runs
    # out of it, never out of the wakes and heartbeats that keep everyone's pods awake.
    gateway_prefix = API_PREFIX + "/gateway"
    events_path = gateway_prefix + "/events"
    gateway_limit = settings.gateway.api_rate_limit if settings.gateway else settings.api.rate_limit
    gateway_setting = "gateway.api_rate_limit" if settings.gateway else "api.rate_limit"
    app.add_middleware(
        WriteRateLimitMiddleware, limit=settings.api.rate_limit, prefix=API_PREFIX, exclude=gateway_prefix
    )
    app.add_middleware(
        WriteRateLimitMiddleware,
        limit=gateway_limit,
        prefix=gateway_prefix,
        setting=gateway_setting,
        exclude=events_path,
        api="gateway",
    )
    app.add_middleware(
        WriteRateLimitMiddleware,
        limit=gateway_limit,
        prefix=events_path,
        setting=gateway_setting,
        api="gateway_events",
        what="audit events (a budget apart from wakes and heartbeats)",
    )
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.api.max_body_bytes,
        error_renderers={SCIM_PREFIX: error_response},  # SCIM clients get SCIM Error bodies
    )
    app.add_middleware(RequestIdMiddleware)
    return app
