"""The Kubernetes target's settings model (settings key `kube`, env SUP_KUBE__*)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from sup.common.sections import Section
from sup.domain.posix import check_name
from sup.targets.kube.shared_homes import home_root
from sup.targets.kube.values import (
    cidr,
    dns_label,
    dns_subdomain,
    inside,
    label_key,
    label_value,
    overlaps,
    parse_quantity,
    parse_retention,
    port_range,
    positive_quantity,
)

# munged's uid in the munge sidecar by default: a system uid (below 1000), outside SUP's default uid
# ranges; the settings refuse a uid range of SUP's that holds it (spec.py, reserved_uids).
DEFAULT_MUNGE_UID = 994


class KubeSettings(Section):
    """The Kubernetes target (settings key `kube`): per user a home PersistentVolumeClaim and a login
    StatefulSet (one sshd pod) with its Service and NetworkPolicy, all in `namespace`; per group named
    in `group_pods`, a shared login pod. Rendered from the shipped templates (`templates_dir`
    overrides them file by file). Objects carry `app.kubernetes.io/managed-by: sup`; SUP never writes
    an object without it. docs/kubernetes.md.

    - `namespace` should not be the namespace SUP itself runs in: SUP may create StatefulSets there,
      whose pods could mount SUP's own Secrets (the Helm chart refuses it; SECURITY.md, "What SUP can
      do to the cluster"). Sizes and CPU/memory are Kubernetes quantities (`8Gi`, `500m`); CIDRs must
      have their host bits zero (`10.1.0.0/16`, not `10.1.0.1/16`). An allowed egress CIDR that
      equals (or lies inside) a blocked one is refused: the blocked address could not be carved out
      of it. `cpu_request` and `memory_request` may not exceed `cpu` and `memory`. In the environment,
      lists and maps are JSON: `SUP_KUBE__SSH_SOURCES='["203.0.113.0/24"]'`,
      `SUP_KUBE__NODE_SELECTOR='{"pool": "login"}'`.
    - `watch` (default true; `SUP_KUBE__WATCH=false` turns it off): a long-running `sup serve` keeps
      the namespace's objects of SUP's kinds in a cache fed by watches (with bookmarks), seeded by the
      lists of its second full pass, and later full passes read the cache instead of listing. A pass
      uses it only when every watch is live and shows SUP's own last writes (waiting at most 2 s),
      else it lists as before and reseeds it; a watch that breaks (410 Gone, a dropped connection)
      relists by itself with a backoff. A one-shot `sup reconcile` never starts watches. Needs the
      `watch` verb on the five kinds (the chart's Role grants it). docs/architecture.md, "The
      Kubernetes watch cache".
    - Forwarding in login pods (user and group pods alike; docs/login-pods.md, "Forwarding", has the
      reasons): `ssh_tcp_forwarding` (default `local`: `ssh -L` and `-D` to what the pod may reach, no
      `ssh -R`, which would make the pod listen for the person's machine) and `ssh_agent_forwarding`
      (default true: `ssh -A`, for git with one's own key). They reach sshd as
      `SUP_SSH_ALLOW_TCP_FORWARDING` / `SUP_SSH_ALLOW_AGENT_FORWARDING` in the pod; a login image
      older than them keeps OpenSSH's defaults (both on). Changing either restarts every login pod
      once (the pod template changes), and so does the upgrade that introduces them. An unquoted YAML
      `no` is read as the word `no`.
    - Changing `field_manager` makes SUP treat the objects it created as somebody else's (it reports
      their names as taken and leaves them alone): keep it stable.
    - Slurm in login pods: `slurm_config_map` and `munge_key_secret` go together (Slurm's commands
      authenticate with munge); both name objects the site creates in `namespace` (SUP never writes
      them): `kubectl -n NS create configmap slurm-config --from-file=slurm.conf` and `kubectl -n NS
      create secret generic munge-key --from-file=munge.key=/etc/munge/munge.key`. Names are RFC 1123
      subdomains. `munge_uid` (default 994, a system uid) may not lie in a uid range SUP gives people.
      `slurmd_cidrs` needs `srun_port_range` (`LOW-HIGH`, within 1024-65535), and slurm.conf must say
      `SrunPortRange=LOW-HIGH` too: srun listens on those ports, and slurmctld and the nodes' slurmd
      connect to them (the NetworkPolicy admits exactly those sources on exactly those ports; its
      `endPort` needs a NetworkPolicy implementation that supports port ranges, as kube-router, Calico
      and Cilium do).
    """

    namespace: str = Field(
        description="where every per-user and per-group object lives (an RFC 1123 label)",
        examples=["research"],
    )
    kubeconfig: str | None = Field(
        None,
        description="kubeconfig file; absent: the pod's service account (SUP running in the cluster)",
        examples=["/etc/sup/kubeconfig"],
    )
    context: str | None = Field(None, description="kubeconfig context; default: its current context")
    field_manager: str = Field(
        "sup", min_length=1, max_length=120, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="server-side apply field manager; SUP owns exactly the fields it applies under it",
    )  # fmt: skip
    templates_dir: str | None = Field(
        None,
        description="a directory whose *.yaml.j2 files replace the shipped templates of the same name, "
        "file by file",
    )
    home_size: str = Field(
        "10Gi",
        description="home volume size; a larger value grows existing (bound) claims, a smaller one never "
        "shrinks them",
    )
    home_storage_class: str | None = Field(
        None, description="StorageClass of home claims; default: the cluster's default StorageClass"
    )
    home_access_mode: Literal["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"] = Field(
        "ReadWriteOnce", description="access mode of home claims"
    )
    home_mode: Literal["claim", "shared"] = Field(
        "claim",
        description="claim: a PersistentVolumeClaim per person (home_size, home_storage_class, "
        "home_access_mode, pvc_retention), seen by their login pod only, never by jobs; shared: every "
        "home is a directory of the site's shared filesystem (shared_home_claim), mounted at home_root "
        "on the compute nodes too, so jobs read and write it (docs/login-pods.md, 'Homes')",
    )
    shared_home_claim: str | None = Field(
        None,
        description="with home_mode shared (required there, refused otherwise): a ReadWriteMany "
        "PersistentVolumeClaim of the site's in namespace whose root is the home root; a login pod "
        "mounts only its person's directory of it (subPath), which `sup homes serve` makes",
    )
    home_root: str = Field(
        "/home",
        description="with home_mode shared: where the shared volume is mounted on the compute nodes; "
        "every home (accounts.home_template) must lie below it, and a person whose home does not gets "
        "no login pod (reported)",
    )
    pvc_retention: str = Field(
        "keep",
        description="how long a home claim outlives its user's deactivation or removal: 'keep' (for "
        "ever) or a duration such as 30d, 12h, 0s. Homes are named by uid (home-u10001) and survive "
        "renames; a claim whose uid is active is never retired",
    )
    image: str = Field(
        "localhost/sup-login:0.1.0",
        description="login image (docs/images.md, 'The login image'): scripts/build-images makes this one; a "
        "site pushes it to its registry and sets the name it has there",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        "IfNotPresent", description="imagePullPolicy of login pods"
    )
    image_pull_secrets: list[str] = Field(default_factory=list, description="names of Secrets in namespace")
    cpu: str = Field("4", description="CPU limit of a login pod")
    memory: str = Field("8Gi", description="memory limit of a login pod")
    cpu_request: str | None = Field(
        None, description="CPU request of a login pod, at most cpu; default: equal to cpu"
    )
    memory_request: str | None = Field(
        None, description="memory request of a login pod, at most memory; default: equal to memory"
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict,
        description="nodeSelector of login pods",
        examples=[{"node.kubernetes.io/role": "login"}],
    )
    ssh_port: int = Field(
        2222,
        ge=1024,
        le=65535,
        description="sshd's port inside the pod (unprivileged: sshd runs as the user)",
    )
    ssh_tcp_forwarding: Literal["yes", "local", "remote", "no"] = Field(
        "local",
        description="sshd's AllowTcpForwarding in login pods: local lets a person forward from their "
        "machine to what their pod may reach (ssh -L, -D), not make the pod listen for them (ssh -R); "
        "remote: only ssh -R; yes: both; no: neither. docs/login-pods.md, 'Forwarding'",
    )
    ssh_agent_forwarding: bool = Field(
        True,
        description="sshd's AllowAgentForwarding in login pods (ssh -A: git with the person's own key)",
    )
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        "ClusterIP",
        description="type of a login pod's Service: ClusterIP is headless (no ClusterIP allocated, the "
        "name resolves to the pod's address, reached at ssh_port); NodePort and LoadBalancer (for direct "
        "ssh from outside) with externalTrafficPolicy Local",
    )
    service_port: int = Field(
        22,
        ge=1,
        le=65535,
        description="the ssh port of a login pod's Service (used by NodePort and LoadBalancer ones; a "
        "headless one is reached at ssh_port)",
    )
    ssh_sources: list[str] = Field(
        default_factory=list, description="CIDRs allowed to reach sshd; empty: no ssh ingress at all"
    )
    dns_namespace: str = Field(
        "kube-system", description="namespace of the cluster DNS pods the login pods may query"
    )
    dns_pod_labels: dict[str, str] = Field(
        default_factory=lambda: {"k8s-app": "kube-dns"}, description="labels of those DNS pods"
    )
    dns_cidrs: list[str] = Field(
        default_factory=list,
        description="other DNS servers login pods may query, such as node-local DNS",
        examples=[["169.254.20.10/32"]],
    )
    ldap_cidrs: list[str] = Field(
        default_factory=list,
        description="LDAP servers a login pod may reach (none by default: login pods read SUP's "
        "libnss-cache maps, not LDAP; set only for software of the site's that queries LDAP)",
    )
    ldap_ports: list[int] = Field(default_factory=lambda: [389, 636], description="ports of ldap_cidrs")
    slurmctld_cidrs: list[str] = Field(
        default_factory=list, description="the Slurm controller(s) login pods may reach"
    )
    slurmctld_ports: list[int] = Field(default_factory=lambda: [6817], description="ports of slurmctld_cidrs")
    slurmd_cidrs: list[str] = Field(
        default_factory=list,
        description="the compute nodes' slurmd: srun in a login pod connects to them, and they connect "
        "back to srun on srun_port_range",
    )
    slurmd_ports: list[int] = Field(default_factory=lambda: [6818], description="ports of slurmd_cidrs")
    srun_port_range: str | None = Field(
        None,
        description="ports srun listens on in a login pod, LOW-HIGH within 1024-65535 (set the same "
        "SrunPortRange in slurm.conf): slurmctld and slurmd may connect to them; required with "
        "slurmd_cidrs",
        examples=["60001-63000"],
    )
    slurm_config_map: str | None = Field(
        None, description="a ConfigMap in namespace (key slurm.conf) mounted read-only at /etc/slurm"
    )
    munge_key_secret: str | None = Field(
        None,
        description="a Secret in namespace (key munge.key) mounted only into the login pod's munge "
        "sidecar, never where the user runs; required with slurm_config_map",
    )
    munge_uid: int = Field(
        DEFAULT_MUNGE_UID,
        ge=1,
        le=2147483647,
        description="uid and gid munged runs as in the munge sidecar: not root, and outside the uid "
        "ranges SUP gives people (ids.uid_range, ids.supplied_uid_ranges)",
    )
    egress_cidrs: list[str] = Field(
        default_factory=list,
        description="anything else login pods may reach, every port; must not overlap cluster_cidrs, "
        "except that a cluster range strictly inside one (0.0.0.0/0 for the internet) is carved out of it",
    )
    cluster_cidrs: list[str] = Field(
        default_factory=list,
        description="the cluster's own ranges: nodes, pods, Services and the API server; login pods "
        "never reach them through egress_cidrs",
    )
    blocked_cidrs: list[str] = Field(
        default_factory=lambda: ["169.254.169.254/32", "fd00:ec2::254/128"],
        description="never reachable, even inside an allowed CIDR (cloud metadata addresses)",
    )
    login_groups: list[str] = Field(
        default_factory=list,
        description="only members of these groups get a home volume and a login pod; empty: every "
        "active user (the others stay in LDAP and Slurm: jobs, no login pod)",
    )
    group_pods: list[str] = Field(
        default_factory=list, description="groups that get a shared login pod their members can use"
    )
    group_host_key_secret: str | None = Field(
        None,
        description="a Secret of the site's in namespace holding each group pod's SSH host key (key: the "
        "group's name, an OpenSSH private key), mounted into that pod only, so that its host key "
        "outlives restarts and sleep; a group without a key there gets a new one at each start",
    )
    page_size: int = Field(500, ge=1, le=10000, description="objects per page of a list")
    timeout_seconds: int = Field(30, ge=1, le=600, description="per-request timeout")
    workers: int = Field(8, ge=1, le=64, description="writes in flight at once")
    watch: bool = Field(
        True,
        description="a long-running process keeps the namespace's objects in a cache fed by watches, "
        "so a full pass that can trust it does not list them; false: every pass lists",
    )

    @field_validator("ssh_tcp_forwarding", mode="before")
    @classmethod
    def _yes_no(cls, value: object) -> object:
        """YAML 1.1 reads an unquoted yes or no as a boolean: take it as the word it was."""
        if isinstance(value, bool):
            return "yes" if value else "no"
        return value

    @field_validator("namespace", "dns_namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        return dns_label(value, "namespace")

    @field_validator("home_size", "cpu", "memory", "cpu_request", "memory_request")
    @classmethod
    def _quantity(cls, value: str | None) -> str | None:
        return None if value is None else positive_quantity(value)

    @field_validator("shared_home_claim")
    @classmethod
    def _claim_name(cls, value: str | None) -> str | None:
        return None if value is None else dns_subdomain(value, "PersistentVolumeClaim name")

    @field_validator("home_root")
    @classmethod
    def _home_root(cls, value: str) -> str:
        return home_root(value)

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
        "ssh_sources",
        "dns_cidrs",
        "ldap_cidrs",
        "slurmctld_cidrs",
        "slurmd_cidrs",
        "egress_cidrs",
        "blocked_cidrs",
        "cluster_cidrs",
    )
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        return [cidr(v) for v in value]

    @field_validator("slurm_config_map")
    @classmethod
    def _config_map(cls, value: str | None) -> str | None:
        return None if value is None else dns_subdomain(value, "ConfigMap name")

    @field_validator("munge_key_secret", "group_host_key_secret")
    @classmethod
    def _secret(cls, value: str | None) -> str | None:
        return None if value is None else dns_subdomain(value, "Secret name")

    @field_validator("srun_port_range")
    @classmethod
    def _srun_ports(cls, value: str | None) -> str | None:
        if value is not None:
            port_range(value)
        return value

    @property
    def srun_ports(self) -> tuple[int, int] | None:
        return None if self.srun_port_range is None else port_range(self.srun_port_range)

    @property
    def headless(self) -> bool:
        """Whether login Services are headless (clusterIP None, service.yaml.j2): those of type
        ClusterIP. NodePort and LoadBalancer Services need a ClusterIP."""
        return self.service_type == "ClusterIP"

    @property
    def login_port(self) -> int:
        """The port a client inside the cluster connects to at a login Service's DNS name (the SSH
        gateway's route): a headless Service's name resolves to the pod's own address, where sshd
        listens on `ssh_port`; any other Service's to its ClusterIP, which listens on `service_port`."""
        return self.ssh_port if self.headless else self.service_port

    @field_validator("ldap_ports", "slurmctld_ports", "slurmd_ports")
    @classmethod
    def _ports(cls, value: list[int]) -> list[int]:
        for port in value:
            if not 1 <= port <= 65535:
                raise ValueError(f"port {port} is not between 1 and 65535")
        return value

    @field_validator("login_groups")
    @classmethod
    def _login_groups(cls, value: list[str]) -> list[str]:
        for name in value:
            check_name(name, kind="group in login_groups")
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
        if (self.slurm_config_map is None) != (self.munge_key_secret is None):
            raise ValueError(
                "kube.slurm_config_map and kube.munge_key_secret go together: Slurm's commands in a "
                "login pod authenticate with munge (set both, or neither)"
            )
        if self.home_mode == "shared" and self.shared_home_claim is None:
            raise ValueError(
                "kube.home_mode is shared but kube.shared_home_claim is not set: name the site's "
                "ReadWriteMany PersistentVolumeClaim (in kube.namespace) whose root is the home root"
            )
        if self.home_mode == "claim" and self.shared_home_claim is not None:
            raise ValueError(
                f"kube.shared_home_claim is {self.shared_home_claim} but kube.home_mode is claim: homes "
                "are per-person claims in that mode; set home_mode: shared to mount the shared claim"
            )
        if self.slurmd_cidrs and self.srun_port_range is None:
            raise ValueError(
                "kube.slurmd_cidrs is set but kube.srun_port_range is not: slurmd connects back to srun "
                "in the login pod, on the ports slurm.conf's SrunPortRange names; set both to the same "
                "range (e.g. 60001-63000)"
            )
        allowed = (
            self.dns_cidrs + self.ldap_cidrs + self.slurmctld_cidrs + self.slurmd_cidrs + self.egress_cidrs
        )
        for blocked in self.blocked_cidrs:
            for network in allowed:
                if overlaps(blocked, network) and not _strictly_inside(blocked, network):
                    raise ValueError(
                        f"egress CIDR {network} covers all of blocked_cidrs {blocked}: the blocked "
                        "address cannot be carved out of it; remove it or narrow blocked_cidrs"
                    )
        for network in self.egress_cidrs:
            for cluster in self.cluster_cidrs:
                if overlaps(cluster, network) and not _strictly_inside(cluster, network):
                    raise ValueError(
                        f"egress_cidrs {network} overlaps the cluster's range {cluster} (cluster_cidrs): "
                        "login pods would reach nodes, pods, Services or the API server through it; "
                        "narrow it, or use a wider range that the cluster's ranges can be carved out of"
                    )
        return self


def _strictly_inside(inner: str, outer: str) -> bool:
    return inside(inner, outer)
