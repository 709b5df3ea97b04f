"""What a Kubernetes template may read: the typed values the renderer hands Jinja (pure).

This is the templates' interface, shipped ones and operators' own alike (docs/kubernetes.md,
"Writing your own templates"): every template gets a `TemplateContext`'s variables (`namespace`,
`owner`, `names`, `pod_labels`, `settings`, `network`, `idle_port`), a user's templates `user`
(`UserValues`), a group's `group`, `members` and `shared_claim` (`GroupValues`). The names a template
reads (`settings.cpu`, `user.username`, `network.egress`...) are the ones templates have always read,
so an operator's template keeps working; renaming a field here breaks theirs.

Values are frozen dataclasses, except three: an ipBlock (`IpBlock`, a TypedDict, being Kubernetes
JSON whose key `except` is no Python name), `pod_labels` (a mapping of label to value) and the
settings (`TemplateSettings`, a frozen pydantic model: the `kube` section itself with the two
requests filled in, so that every key a site sets is readable). `| tojson` turns any of them into
the JSON it was before they were typed (`template_json`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict

from sup.domain.desired import DesiredGroup, DesiredUser
from sup.targets.kube import names
from sup.targets.kube.settings import KubeSettings
from sup.targets.kube.values import inside

# A NetworkPolicy ipBlock: {"cidr": ..., "except": [...]} ("except" only when something is carved out).
IpBlock = TypedDict("IpBlock", {"cidr": str, "except": NotRequired[list[str]]})


class TemplateSettings(KubeSettings):
    """`settings`: every key of the `kube` section, with `cpu_request` and `memory_request` resolved
    (a request left unset is its limit)."""

    model_config = ConfigDict(frozen=True)

    cpu_request: str
    memory_request: str

    @classmethod
    def of(cls, settings: KubeSettings) -> TemplateSettings:
        """The view of validated settings (not validated again: the section already was)."""
        values = {name: getattr(settings, name) for name in KubeSettings.model_fields}
        values["cpu_request"] = settings.cpu_request or settings.cpu
        values["memory_request"] = settings.memory_request or settings.memory
        return cls.model_construct(settings.model_fields_set, **values)


@dataclass(frozen=True)
class PortRange:
    """`network.srun_ports`: the ports srun listens on in a login pod (`kube.srun_port_range`)."""

    port: int
    end_port: int


@dataclass(frozen=True)
class NetworkBlocks:
    """`network`: ipBlocks prepared from the CIDR settings, each with the blocked (cloud metadata)
    addresses carved out (`except`). `srun_sources` (slurmctld and slurmd, which connect back to
    srun) only with a `srun_port_range`, whose ports are `srun_ports`."""

    ssh_sources: tuple[IpBlock, ...]
    dns: tuple[IpBlock, ...]
    ldap: tuple[IpBlock, ...]
    slurmctld: tuple[IpBlock, ...]
    slurmd: tuple[IpBlock, ...]
    srun_sources: tuple[IpBlock, ...]
    srun_ports: PortRange | None
    egress: tuple[IpBlock, ...]  # the cluster's own ranges carved out too

    @classmethod
    def of(cls, settings: KubeSettings) -> NetworkBlocks:
        blocked = settings.blocked_cidrs
        ports = settings.srun_ports
        callers = list(dict.fromkeys(settings.slurmctld_cidrs + settings.slurmd_cidrs)) if ports else []
        return cls(
            ssh_sources=ip_blocks(settings.ssh_sources, blocked),
            dns=ip_blocks(settings.dns_cidrs, blocked),
            ldap=ip_blocks(settings.ldap_cidrs, blocked),
            slurmctld=ip_blocks(settings.slurmctld_cidrs, blocked),
            slurmd=ip_blocks(settings.slurmd_cidrs, blocked),
            srun_sources=ip_blocks(callers, blocked),
            srun_ports=PortRange(*ports) if ports else None,
            egress=ip_blocks(settings.egress_cidrs, list(dict.fromkeys([*blocked, *settings.cluster_cidrs]))),
        )


def ip_blocks(cidrs: Iterable[str], blocked: Iterable[str]) -> tuple[IpBlock, ...]:
    """NetworkPolicy ipBlocks for `cidrs`, each with the blocked networks inside it as `except`."""
    blocked = list(blocked)
    result: list[IpBlock] = []
    for cidr in cidrs:
        block: IpBlock = {"cidr": cidr}
        carved = [b for b in blocked if inside(b, cidr)]
        if carved:
            block["except"] = carved
        result.append(block)
    return tuple(result)


@dataclass(frozen=True)
class OwnerValues:
    """`owner`: whose objects these are (`kind` user or group, the exact `name`, its DNS-safe `key`)."""

    kind: str
    name: str
    key: str

    @classmethod
    def of(cls, owner: names.Owner) -> OwnerValues:
        return cls(owner.kind, owner.name, owner.key)


@dataclass(frozen=True)
class ObjectNames:
    """`names`: `home`, the home claim a user's pod mounts (`home-uUID`, an adopted older claim, or
    the shared claim; a group's templates get the unused `home-KEY`); `login`, the login objects'
    name; `key`, the owner's."""

    home: str
    login: str
    key: str


@dataclass(frozen=True)
class Person:
    """`user`, and each of `members`: who logs in. `supplemental_gids`: the gids of their other
    groups (a user's pod's supplementalGroups; empty for a group's members and in a home claim);
    `home_sub_path`: with `kube.home_mode: shared` their directory in the shared claim, else None."""

    username: str
    uid_number: int
    gid_number: int
    home_directory: str
    login_shell: str
    supplemental_gids: tuple[int, ...] = ()
    home_sub_path: str | None = None

    @classmethod
    def of(cls, user: DesiredUser, groups: tuple[int, ...] = (), home_sub_path: str | None = None) -> Person:
        return cls(
            username=user.username,
            uid_number=user.uid_number,
            gid_number=user.gid_number,
            home_directory=user.home_directory,
            login_shell=user.login_shell,
            supplemental_gids=groups,
            home_sub_path=home_sub_path,
        )


@dataclass(frozen=True, kw_only=True)
class Member(Person):
    """One of a group pod's `members`: a `Person` plus `claim`, their home claim (or the shared one)."""

    claim: str

    @classmethod
    def of_member(cls, user: DesiredUser, *, claim: str, home_sub_path: str | None) -> Member:
        return cls(**dataclasses.asdict(Person.of(user, home_sub_path=home_sub_path)), claim=claim)


@dataclass(frozen=True)
class GroupName:
    """`group`: the group a shared login pod is for."""

    name: str
    gid_number: int

    @classmethod
    def of(cls, group: DesiredGroup) -> GroupName:
        return cls(group.name, group.gid_number)


@dataclass(frozen=True)
class UserValues:
    """What a user's templates read besides the common variables: `user`."""

    user: Person

    @property
    def people(self) -> tuple[Person, ...]:
        return (self.user,)


@dataclass(frozen=True)
class GroupValues:
    """What a group's templates read besides the common variables: `group`, `members` (sorted by
    name) and `shared_claim` (the shared claim with `kube.home_mode: shared`, else None)."""

    group: GroupName
    members: tuple[Member, ...]
    shared_claim: str | None

    @property
    def people(self) -> tuple[Person, ...]:
        return self.members


@dataclass(frozen=True)
class TemplateContext:
    """Everything one template renders from."""

    namespace: str
    owner: OwnerValues
    names: ObjectNames
    pod_labels: Mapping[str, str]
    settings: TemplateSettings
    network: NetworkBlocks
    idle_port: int | None  # the idle reporter's port when login pods may sleep
    subject: UserValues | GroupValues

    def variables(self) -> dict[str, object]:
        """The names a template reads: the common ones and the subject's (`user`, or `group`,
        `members` and `shared_claim`)."""
        common = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "subject"}
        own = {f.name: getattr(self.subject, f.name) for f in dataclasses.fields(self.subject)}
        return {**common, **own}


def template_json(value: object) -> Any:
    """`json.dumps`'s `default` for `| tojson`: a value of this module as the JSON mapping it was
    before it was typed (a dataclass's fields, the settings' JSON form)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
