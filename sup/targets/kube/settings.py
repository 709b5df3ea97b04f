"""The Kubernetes target's settings model (settings key `kube`, env SUP_KUBE__*)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from sup.common.sections import Section
from sup.domain.posix import check_name
from sup.targets.kube.values import (
    cidr,
    dns_label,
    inside,
    label_key,
    label_value,
    overlaps,
    parse_quantity,
    parse_retention,
    positive_quantity,
)


class KubeSettings(Section):
    """The Kubernetes target (settings key `kube`): per user a home PersistentVolumeClaim and a login
    StatefulSet (one sshd pod) with its Service and NetworkPolicy, all in `namespace`; per group named
    in `group_pods`, a shared login pod. Rendered from templates/kube/*.yaml.j2 (`templates_dir`
    overrides them file by file). Objects carry `app.kubernetes.io/managed-by: sup`; SUP never writes
    an object without it.
    """

    namespace: str = Field(description="where the per-user objects live (RFC 1123 label)")
    kubeconfig: str | None = Field(
        None, description="kubeconfig file; absent: the in-cluster service account (running in a pod)"
    )
    context: str | None = Field(None, description="kubeconfig context; default: its current context")
    field_manager: str = Field(
        "sup", min_length=1, max_length=120, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="server-side apply field manager; SUP owns exactly the fields it applies under it",
    )  # fmt: skip
    templates_dir: str | None = Field(
        None, description="a directory whose *.yaml.j2 files replace the shipped ones of the same name"
    )
    home_size: str = Field("10Gi", description="home volume size; a larger value grows existing claims")
    home_storage_class: str | None = Field(None, description="default: the cluster's default class")
    home_access_mode: Literal["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"] = "ReadWriteOnce"
    pvc_retention: str = Field(
        "keep",
        description="how long a home claim outlives its user's deactivation or removal: 'keep' (for "
        "ever) or a duration such as 30d, 12h, 0s",
    )
    image: str = Field("sup-login:latest", description="login image: sshd (and sssd) as described in README")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    image_pull_secrets: list[str] = Field(default_factory=list, description="names of Secrets in namespace")
    cpu: str = Field("4", description="CPU limit of a login pod")
    memory: str = Field("8Gi", description="memory limit of a login pod")
    cpu_request: str | None = Field(None, description="default: equal to cpu")
    memory_request: str | None = Field(None, description="default: equal to memory")
    node_selector: dict[str, str] = Field(default_factory=dict)
    ssh_port: int = Field(
        2222,
        ge=1024,
        le=65535,
        description="sshd's port inside the pod (unprivileged: sshd runs as the user)",
    )
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    service_port: int = Field(22, ge=1, le=65535)
    ssh_sources: list[str] = Field(
        default_factory=list, description="CIDRs allowed to reach sshd; empty: no ssh ingress at all"
    )
    dns_namespace: str = Field("kube-system", description="namespace of the cluster DNS pods")
    dns_pod_labels: dict[str, str] = Field(default_factory=lambda: {"k8s-app": "kube-dns"})
    dns_cidrs: list[str] = Field(default_factory=list, description="extra DNS servers, e.g. node-local DNS")
    ldap_cidrs: list[str] = Field(default_factory=list, description="the LDAP servers sssd reads")
    ldap_ports: list[int] = Field(default_factory=lambda: [389, 636])
    slurmctld_cidrs: list[str] = Field(default_factory=list, description="the Slurm controller(s)")
    slurmctld_ports: list[int] = Field(default_factory=lambda: [6817])
    egress_cidrs: list[str] = Field(default_factory=list, description="other destinations, every port")
    blocked_cidrs: list[str] = Field(
        default_factory=lambda: ["169.254.169.254/32", "fd00:ec2::254/128"],
        description="never reachable, even inside an allowed CIDR (cloud metadata addresses)",
    )
    group_pods: list[str] = Field(
        default_factory=list, description="groups that get a shared login pod their members can use"
    )
    page_size: int = Field(500, ge=1, le=10000, description="objects per page of a list")
    timeout_seconds: int = Field(30, ge=1, le=600, description="per-request timeout")
    workers: int = Field(8, ge=1, le=64, description="writes in flight at once")

    @field_validator("namespace", "dns_namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        return dns_label(value, "namespace")

    @field_validator("home_size", "cpu", "memory", "cpu_request", "memory_request")
    @classmethod
    def _quantity(cls, value: str | None) -> str | None:
        return None if value is None else positive_quantity(value)

    @field_validator("pvc_retention")
    @classmethod
    def _retention(cls, value: str) -> str:
        parse_retention(value)
        return value

    @field_validator("home_storage_class", "image", "kubeconfig", "context", "templates_dir")
    @classmethod
    def _one_word(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or any(c.isspace() for c in value)):
            raise ValueError("must be non-empty and without spaces")
        return value

    @field_validator("image_pull_secrets")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        return [dns_label(v, "secret name") for v in value]

    @field_validator("node_selector", "dns_pod_labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        return {label_key(k): label_value(v) for k, v in value.items()}

    @field_validator(
        "ssh_sources", "dns_cidrs", "ldap_cidrs", "slurmctld_cidrs", "egress_cidrs", "blocked_cidrs"
    )
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        return [cidr(v) for v in value]

    @field_validator("ldap_ports", "slurmctld_ports")
    @classmethod
    def _ports(cls, value: list[int]) -> list[int]:
        for port in value:
            if not 1 <= port <= 65535:
                raise ValueError(f"port {port} is not between 1 and 65535")
        return value

    @field_validator("group_pods")
    @classmethod
    def _groups(cls, value: list[str]) -> list[str]:
        for name in value:
            check_name(name, kind="group in group_pods")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> KubeSettings:
        for limit, request in (("cpu", self.cpu_request), ("memory", self.memory_request)):
            if request is not None and parse_quantity(request) > parse_quantity(getattr(self, limit)):
                raise ValueError(f"{limit}_request {request} is more than {limit} {getattr(self, limit)}")
        allowed = self.dns_cidrs + self.ldap_cidrs + self.slurmctld_cidrs + self.egress_cidrs
        for blocked in self.blocked_cidrs:
            for network in allowed:
                if overlaps(blocked, network) and not _strictly_inside(blocked, network):
                    raise ValueError(
                        f"egress CIDR {network} covers all of blocked_cidrs {blocked}: the blocked "
                        "address cannot be carved out of it; remove it or narrow blocked_cidrs"
                    )
        return self


def _strictly_inside(inner: str, outer: str) -> bool:
    return inside(inner, outer)
