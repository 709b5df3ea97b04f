"""/api/v1/gateway/*: what `sup gateway` calls with a token of role `gateway` (admin may too), and
the list of open sessions for people (viewer and above). docs/ssh-gateway.md, "The contract with SUP"."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from pydantic import AwareDatetime, BaseModel, Field

from sup.api import API_PREFIX
from sup.api.context import ApiContext, Viewer, requires
from sup.common.schemas import Body
from sup.config.ssh_ca import plain_keys_taken
from sup.domain.login_pods import Refusal, RefusalReason, Route
from sup.domain.roles import Role
from sup.logins import service, wake_state
from sup.ssh_ca.service import SshCa
from sup.store.lookup import require_user
from sup.store.models import utcnow

GatewayToken = Annotated[ApiContext, requires(Role.gateway)]
Name = Annotated[str, Field(min_length=1, max_length=64)]
Kind = Literal["user", "group"]

router = APIRouter(prefix=API_PREFIX + "/gateway", tags=["gateway"])


class PodOut(BaseModel):
    name: str = Field(description='what the client names: "login" (own pod) or the group\'s name')
    kind: Kind
    owner: str
    service: str = Field(description="the pod's Service in `namespace`")
    namespace: str
    port: int = Field(
        description="the port to connect to at the Service's DNS name: kube.ssh_port (the pod's own) when "
        "the Service is headless (kube.service_type ClusterIP), else kube.service_port"
    )
    awake: bool = Field(description="false: asleep, POST wake before connecting")


class RoutesOut(BaseModel):
    username: str
    fingerprints: list[str] = Field(
        description="SHA256 fingerprints of the person's keys (none when ssh_ca.plain_keys is false)"
    )
    certificate_authorities: list[str] = Field(
        default_factory=list,
        description="SHA256 fingerprints of the CAs whose certificates for this username are taken "
        "(ssh_ca; empty: none)",
    )
    pods: list[PodOut] = Field(description="own pod first, then group pods")


class NoRoute(BaseModel):
    detail: Literal["no route"]
    reason: RefusalReason = Field(description="for the gateway's audit call, never for the client")


@router.get(
    "/routes/{username}",
    response_model=RoutesOut,
    responses={404: {"model": NoRoute}},
    summary="A person's key fingerprints and the login pods they may reach",
)
def get_routes(ctx: GatewayToken, request: Request, username: str) -> Any:
    with ctx.transaction() as session:
        found = service.routes(session, ctx.settings, username)
    if isinstance(found, Refusal):
        return JSONResponse({"detail": "no route", "reason": found.reason.value}, status_code=404)
    ca: SshCa | None = getattr(request.app.state, "ssh_ca", None)
    plain_keys = plain_keys_taken(ca.settings if ca is not None else None)
    return RoutesOut(
        username=found.username,
        fingerprints=found.fingerprints if plain_keys else [],
        certificate_authorities=ca.fingerprints if ca is not None else [],
        pods=[PodOut(**vars(pod)) for pod in found.pods],
    )


class AwakePodOut(BaseModel):
    kind: Kind
    name: str = Field(description="\"login\" (a user's own pod) or the group's name")
    owner: str = Field(description="the user or group the pod belongs to (`name` in the heartbeat's busy)")
    service: str = Field(description="the pod's Service in `namespace`")
    namespace: str
    port: int = Field(description="the idle reporter's port (gateway.idle_port)")


@router.get(
    "/awake",
    response_model=list[AwakePodOut],
    summary="The awake login pods that may sleep soon: the ones whose idle reporter to ask",
)
def get_awake(ctx: GatewayToken) -> list[AwakePodOut]:
    with ctx.transaction() as session:
        pods = service.awake_pods(session, ctx.settings, utcnow())
    return [
        AwakePodOut(
            kind=p.kind, name=p.name, owner=p.owner, service=p.service, namespace=p.namespace, port=p.port
        )
        for p in pods
    ]


class WakeIn(Body):
    kind: Kind
    name: Name


class WakeOut(BaseModel):
    awake: Literal[True]


@router.post("/wake", response_model=WakeOut, summary="Wake a login pod now (idempotent)")
def post_wake(ctx: GatewayToken, body: WakeIn) -> WakeOut:
    from sup.targets.kube import WakeError  # loads the Kubernetes client: only when waking

    try:
        with ctx.transaction() as session:
            service.wake(session, ctx.settings, Route(body.kind, body.name), utcnow(), ctx.actor)
    except WakeError as exc:
        raise HTTPException(503, str(exc)) from None
    return WakeOut(awake=True)


class SessionIn(Body):
    kind: Kind
    name: Name
    username: Name
    since: AwareDatetime
    source: str = Field(max_length=64, description="the client's address, ip:port")


class BusyIn(Body):
    kind: Kind
    name: Name
    busy: bool | None = Field(description="the idle reporter's answer; null: no answer")


class UsedIn(Body):
    kind: Kind
    name: Name
    at: AwareDatetime = Field(
        description="when a tunnel of this replica to the pod last opened or closed, or now if one is open"
    )


class HeartbeatIn(Body):
    gateway: str = Field(min_length=1, max_length=128, description="the reporting replica's id")
    sessions: list[SessionIn] = Field(default_factory=list, max_length=100_000)
    busy: list[BusyIn] = Field(default_factory=list, max_length=100_000)
    used: list[UsedIn] = Field(
        default_factory=list,
        max_length=100_000,
        description="pods in use since the last heartbeat (absent from older gateways)",
    )


@router.post("/heartbeat", status_code=204, summary="A gateway replica's open sessions and busy pods")
def post_heartbeat(ctx: GatewayToken, body: HeartbeatIn) -> Response:
    gateway = ctx.settings.gateway
    interval = gateway.heartbeat_seconds if gateway is not None else 15.0
    with ctx.transaction() as session:
        wake_state.record_heartbeat(
            session,
            body.gateway,
            [s.model_dump(mode="json") for s in body.sessions],
            [b.model_dump(mode="json") for b in body.busy],
            utcnow(),
            interval,
            [(Route(u.kind, u.name), u.at) for u in body.used],
        )
    return Response(status_code=204)


class UsedOut(BaseModel):
    awake: bool = Field(description="false: the pod was put to sleep meanwhile, POST wake")


@router.post("/used", response_model=UsedOut, summary="A tunnel opens to an awake login pod: in use now")
def post_used(ctx: GatewayToken, body: WakeIn) -> UsedOut:
    with ctx.transaction() as session:
        awake = service.used(session, ctx.settings, Route(body.kind, body.name), utcnow())
    return UsedOut(awake=awake)


class EventIn(Body):
    event: Literal["login", "refused", "cut"]  # cut: a held tunnel closed, its route gone
    username: str = Field(max_length=256, description="as the client sent it")
    fingerprint: str | None = Field(None, max_length=128)
    source: str = Field(max_length=64)
    reason: RefusalReason | None = None
    pod: str | None = Field(None, max_length=64)


@router.post("/events", status_code=204, summary="A login, refusal or cut tunnel, into the audit log")
def post_event(ctx: GatewayToken, body: EventIn) -> Response:
    with ctx.transaction() as session:
        service.event(session, ctx.actor, body.model_dump(mode="json"))
    return Response(status_code=204)


class SessionOut(BaseModel):
    gateway: str
    kind: Kind
    name: str
    username: str
    since: str
    source: str


@router.get("/sessions", response_model=list[SessionOut], summary="Who is connected through the gateway")
def get_sessions(ctx: Viewer) -> list[SessionOut]:
    gateway = ctx.settings.gateway
    interval = gateway.heartbeat_seconds if gateway is not None else 15.0
    with ctx.transaction() as session:
        found = wake_state.live_sessions(session, utcnow(), interval)
    return [SessionOut(**vars(s)) for s in found]


class PersonLoginOut(BaseModel):
    username: str
    pods: list[PodOut] = Field(description="the login pods they may reach, own first (none: see reason)")
    reason: RefusalReason | None = Field(None, description="why the person may reach no pod")
    sessions: list[SessionOut] = Field(description="their sessions open through the gateway now")


@router.get(
    "/people/{username}",
    response_model=PersonLoginOut,
    summary="One person's login pods (awake or asleep) and open gateway sessions, for people to read",
)
def get_person(ctx: Viewer, username: str) -> PersonLoginOut:
    gateway = ctx.settings.gateway
    interval = gateway.heartbeat_seconds if gateway is not None else 15.0
    with ctx.transaction() as session:
        require_user(session, username)
        found = service.routes(session, ctx.settings, username)
        live = wake_state.live_sessions(session, utcnow(), interval)
    if isinstance(found, Refusal):
        pods, reason = [], found.reason
    else:
        pods, reason = [PodOut(**vars(pod)) for pod in found.pods], None
    return PersonLoginOut(
        username=username,
        pods=pods,
        reason=reason,
        sessions=[SessionOut(**vars(s)) for s in live if s.username == username],
    )
