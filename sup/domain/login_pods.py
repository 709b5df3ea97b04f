"""Login pods: who gets one, and which one a person reaching the SSH gateway may be tunnelled to, and
why not (docs/ssh-gateway.md).

Who gets a login pod (`login_pods`, per person `own_pod`) is decided here once: the Kubernetes target
renders those pods, the sleep step keeps their wake state, and the gateway's routes answer from the
store with the same rule.

The gateway authenticates a person at the edge with a public key SUP knows, then forwards the
`direct-tcpip` channel that `ssh -J` opens to that person's login pod; the person's client then
authenticates to the pod's own sshd through the tunnel. The destination the client names is only a
choice among the pods the person may use: `login` for their own pod, or the name of a group in
`kube.group_pods` they belong to. It is never used as an address.

Pure: the caller builds a `GatewayPerson` from the store (None for a username SUP does not know) and
passes the fingerprint of the key the client proved it holds (`SHA256:...`, as `ssh-keygen -l`
prints it and `sup.domain.sshkeys.fingerprint` computes). A `Refusal` carries the reason for metrics
and the audit log; the client must see the same failure whatever the reason, so that the gateway
answers no question about who exists.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # desired.py names Route: a runtime import would be circular
    from sup.domain.desired import DesiredState

OWN_POD = "login"  # the destination name that means "my own login pod"


@dataclass(frozen=True)
class GatewayPerson:
    """A person as the store holds them, as far as the gateway cares.

    `provisioned`: SUP provisions them at all (`access.groups`); `own_pod`: they get a login pod of
    their own (provisioned, and in `kube.login_groups` when that is set); `groups`: the names of the
    SUP groups they are a member of."""

    username: str
    active: bool
    provisioned: bool
    own_pod: bool
    fingerprints: frozenset[str]
    groups: frozenset[str]


@dataclass(frozen=True)
class Route:
    """A login pod: a user's own (`kind` "user", `name` the username) or a group's shared one."""

    kind: Literal["user", "group"]
    name: str


@dataclass(frozen=True)
class PodRoute:
    """A login pod a person may be tunnelled to, as SUP's routes endpoint answers it and the gateway
    reads it: `name` is what the client asks for (`login` or a group's name); `service`,
    `namespace` locate its Service, `port` is the one to connect to at the Service's DNS name (the
    pod's sshd for a headless Service, whose name resolves to the pod's own address)."""

    name: str
    kind: Literal["user", "group"]
    owner: str
    service: str
    namespace: str
    port: int
    awake: bool


def own_pod(groups: Collection[str], login_groups: Collection[str]) -> bool:
    """Whether an active, provisioned person who is a direct member of `groups` gets a login pod of
    their own: everyone does, or with `kube.login_groups` set, the members of those groups only."""
    return not login_groups or any(group in groups for group in login_groups)


def login_pods(
    desired: DesiredState, login_groups: Collection[str], group_pods: Collection[str]
) -> frozenset[Route]:
    """Every login pod SUP keeps: each active person's own (`own_pod`, their direct memberships as
    the desired state holds them), and one per group in `kube.group_pods` that SUP provisions."""
    member_of: dict[str, set[str]] = {}
    for name in login_groups:
        group = desired.groups.get(name)
        for member in group.members if group is not None else ():
            member_of.setdefault(member, set()).add(name)
    pods = {
        Route("user", name)
        for name, user in desired.users.items()
        if user.active and own_pod(member_of.get(name, ()), login_groups)
    }
    pods |= {Route("group", name) for name in group_pods if name in desired.groups}
    return frozenset(pods)


class RefusalReason(StrEnum):
    UNKNOWN = "unknown"  # no such person in the store
    INACTIVE = "inactive"  # suspended or deactivated
    NOT_PROVISIONED = "not_provisioned"  # outside access.groups
    WRONG_KEY = "wrong_key"  # not one of the person's keys
    NO_LOGIN_POD = "no_login_pod"  # neither an own pod nor a group pod
    NO_SUCH_POD = "no_such_pod"  # the destination names no pod this person may use


@dataclass(frozen=True)
class Refusal:
    reason: RefusalReason
    detail: str  # for the audit log and the gateway's own log, never for the client


@dataclass(frozen=True)
class Access:
    """What an authenticated person may reach: their pods, their own first."""

    username: str
    fingerprint: str
    pods: tuple[Route, ...]


def reachable(person: GatewayPerson | None, fingerprint: str, group_pods: Iterable[str]) -> Access | Refusal:
    """Whether this key lets this person through the gateway, and to which pods.

    Checked in this order: the person exists, is active, is provisioned, the key is theirs, some pod
    is theirs to use. Group pods count only for groups in `group_pods` (the `kube.group_pods`
    setting) that the person is a member of."""
    if person is None:
        return Refusal(RefusalReason.UNKNOWN, "no such person")
    who = person.username
    if not person.active:
        return Refusal(RefusalReason.INACTIVE, f"{who} is not active")
    if not person.provisioned:
        return Refusal(RefusalReason.NOT_PROVISIONED, f"{who} is not provisioned")
    if fingerprint not in person.fingerprints:
        return Refusal(RefusalReason.WRONG_KEY, f"{fingerprint} is not a key of {who}")
    pods: list[Route] = [Route("user", who)] if person.own_pod else []
    pods.extend(Route("group", name) for name in sorted(set(group_pods) & person.groups))
    if not pods:
        return Refusal(RefusalReason.NO_LOGIN_POD, f"{who} has no login pod")
    return Access(who, fingerprint, tuple(pods))


def route(
    person: GatewayPerson | None, fingerprint: str, destination: str, group_pods: Iterable[str]
) -> Route | Refusal:
    """The login pod behind a `direct-tcpip` open to `destination` (`login`, or a group's name).

    Everything `reachable` checks is checked again: the gateway asks at each channel open, with the
    person read afresh (a person suspended after logging in gets no new tunnel). OpenSSH lowercases
    the host name it sends; the comparison does too."""
    access = reachable(person, fingerprint, group_pods)
    if isinstance(access, Refusal):
        return access
    wanted = destination.lower()
    for pod in access.pods:
        if (pod.kind == "user" and wanted == OWN_POD) or (pod.kind == "group" and wanted == pod.name):
            return pod
    return Refusal(
        RefusalReason.NO_SUCH_POD, f"{access.username} may not use a login pod named {destination!r}"
    )
