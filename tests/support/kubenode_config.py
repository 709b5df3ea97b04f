"""What the test node's daemons are told, as data: containerd's config and the CNI network, the
kubelet's and kube-proxy's configuration, CoreDNS's Corefile, the controller-manager's, scheduler's,
kubelet's and kube-router's command lines, and the client certificate subjects of the components.

Nothing here starts a process or touches the host: tests/support/kubenode.py (the lifecycle) builds a
`NodeConfig` once it knows the node's address and ports, writes what these functions return and
spawns the daemons. docs/development.md, "The test node", says what runs and why."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509

from tests.support.certs import client_subject

NODE_NAME = "sup-test-node"
BRIDGE = "supbr0"
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
CLUSTER_DOMAIN = "cluster.local"
CNI_BIN_DIR = "/usr/lib/cni"

# the names the API server's certificate holds besides its addresses: the `kubernetes` Service's
APISERVER_DNS = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


def apiserver_flags(inherited: list[str], *, node_ip: str, root: Path) -> list[str]:
    """kube-apiserver's flags for a cluster with a node, from the throwaway API server's own
    (`inherited`): Node authorization, ServiceAccount admission (the controller-manager makes the
    ServiceAccounts pods need), kubelet client certificates, reachable from pods."""
    replaced = {
        "--bind-address": "0.0.0.0",  # pods reach it through the `kubernetes` Service
        "--advertise-address": node_ip,
        "--service-cluster-ip-range": SERVICE_CIDR,
        "--authorization-mode": "Node,RBAC",
    }
    flags = []
    for flag in inherited:
        name = flag.split("=", 1)[0]
        if name == "--disable-admission-plugins":
            continue
        flags.append(f"{name}={replaced[name]}" if name in replaced else flag)
    return [
        *flags,
        "--enable-admission-plugins=NodeRestriction",
        "--kubelet-preferred-address-types=InternalIP",  # the node's name resolves nowhere
        f"--kubelet-client-certificate={root / 'kubelet-client.pem'}",
        f"--kubelet-client-key={root / 'kubelet-client.key'}",
    ]


def component_subjects(node_name: str) -> dict[str, x509.Name]:
    """Each component's client certificate subject (its user and groups to RBAC and the Node
    authorizer), by the name of its kubeconfig."""
    return {
        "kubelet": client_subject(f"system:node:{node_name}", "system:nodes"),
        "controller-manager": client_subject("system:kube-controller-manager"),
        "scheduler": client_subject("system:kube-scheduler"),
        "kube-proxy": client_subject("system:kube-proxy"),
    }


KUBELET_CLIENT_SUBJECT = client_subject("kube-apiserver-kubelet-client", "system:masters")


@dataclass(frozen=True)
class NodeConfig:
    """The node as its configs see it: where its files are (`root`), its name and address (the
    host's address on the pod bridge, which is also the pods' gateway), the pod subnet, and the
    binaries by name (scripts/build-kube-node)."""

    root: Path
    node_ip: str
    pod_cidr: str
    binaries: dict[str, Path]
    sync_frequency: str = "10s"
    node_name: str = NODE_NAME

    # --- paths -------------------------------------------------------------------------------------

    @property
    def admin_kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    def kubeconfig(self, component: str) -> Path:
        return self.root / f"{component}.kubeconfig"

    @property
    def containerd_dir(self) -> Path:
        return self.root / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd_dir / "containerd.sock"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    # --- containerd and the pod network ------------------------------------------------------------

    def containerd_toml(self) -> str:
        base = self.containerd_dir
        return f"""version = 2
root = "{base / "root"}"
state = "{base / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{self.containerd_socket}"
[ttrpc]
  address = "{base / "containerd.sock.ttrpc"}"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{base / "opt"}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:local"
  # root here lacks CAP_SYS_RESOURCE: without this every sandbox fails ("can't get final child's PID")
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{self.cni_conf_dir}"
"""

    def cni_conflist(self) -> str:
        """The pod network: a bridge (made beforehand, with the node's address on it), addresses
        from the pod subnet, every route through the node."""
        conflist = {
            "cniVersion": "1.0.0",
            "name": "sup-test",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,  # pods need nothing off this machine
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": self.pod_cidr, "gateway": self.node_ip}]],
                        # through the node: Service ClusterIPs are off the pod subnet
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self.root / "cni" / "ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }
        return json.dumps(conflist, indent=2)

    # --- control plane -------------------------------------------------------------------------------

    def controller_manager_argv(self, apiserver_root: Path, secure_port: int) -> list[str]:
        kubeconfig = self.kubeconfig("controller-manager")
        return [
            str(self.binaries["kube-controller-manager"]),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={apiserver_root / 'sa.key'}",
            f"--root-ca-file={apiserver_root / 'ca.pem'}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={secure_port}",
            f"--cert-dir={self.root / 'controller-manager-certs'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--flex-volume-plugin-dir={self.root / 'flexvolume'}",  # else /usr/libexec/kubernetes
            "--v=0",
        ]

    def scheduler_argv(self, secure_port: int) -> list[str]:
        kubeconfig = self.kubeconfig("scheduler")
        return [
            str(self.binaries["kube-scheduler"]),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={secure_port}",
            f"--cert-dir={self.root / 'scheduler-certs'}",
            "--v=0",
        ]

    # --- the node's daemons --------------------------------------------------------------------------

    def kubelet_yaml(self, port: int, client_ca: Path) -> str:
        config: dict[str, Any] = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.node_ip,
            "port": port,
            "readOnlyPort": 0,
            "healthzPort": 0,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(client_ca)},
            },
            "authorization": {"mode": "Webhook"},
            "cgroupDriver": "cgroupfs",
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "failSwapOn": False,
            # kubelet 1.36 refuses cgroup v1 unless told; this VM has cgroup v1
            "failCgroupV1": False,
            "podLogsDir": str(self.root / "pod-logs"),
            "volumePluginDir": str(self.root / "kubelet-plugins"),
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            # images are imported, never pulled: never garbage-collect them
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            # how fast mounted ConfigMap/Secret updates reach pods (KubeCluster's sync_frequency)
            "syncFrequency": self.sync_frequency,
            "serializeImagePulls": False,
            "clusterDNS": [self.node_ip],
            "clusterDomain": CLUSTER_DOMAIN,
            "registerNode": True,
        }
        return yaml.safe_dump(config)

    def kubelet_argv(self, config: Path) -> list[str]:
        return [
            str(self.binaries["kubelet"]),
            f"--config={config}",
            f"--kubeconfig={self.kubeconfig('kubelet')}",
            f"--root-dir={self.root / 'kubelet'}",
            f"--cert-dir={self.root / 'kubelet-certs'}",
            f"--hostname-override={self.node_name}",
            f"--node-ip={self.node_ip}",
            "--v=0",
        ]

    def corefile(self, ready_port: int, *, forward: bool) -> str:
        """CoreDNS on the node's address, port 53: Services' and pods' names from the API server,
        any other name forwarded to the host's resolvers (`forward`: the host has some). No cache:
        a Service a test has just made resolves at once."""
        forwarding = "    forward . /etc/resolv.conf\n" if forward else ""
        return (
            ".:53 {\n"
            f"    bind {self.node_ip}\n"
            "    errors\n"
            f"    ready 127.0.0.1:{ready_port}\n"
            f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n"
            f"        kubeconfig {self.admin_kubeconfig}\n"
            "        fallthrough in-addr.arpa ip6.arpa\n"
            "    }\n"
            f"{forwarding}"
            "}\n"
        )

    def kube_proxy_yaml(self, metrics_port: int, healthz_port: int) -> str:
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": "iptables",
            "clusterCIDR": self.pod_cidr,
            "hostnameOverride": self.node_name,
            "bindAddress": self.node_ip,
            "metricsBindAddress": f"127.0.0.1:{metrics_port}",
            "healthzBindAddress": f"127.0.0.1:{healthz_port}",
            "clientConnection": {"kubeconfig": str(self.kubeconfig("kube-proxy"))},
            "conntrack": {"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
            # NodePorts on 127.0.0.1 would need net.ipv4.conf.all.route_localnet=1
            "iptables": {"localhostNodePorts": False},
        }
        return yaml.safe_dump(config)

    def kube_router_argv(self) -> list[str]:
        """kube-router for NetworkPolicy only (no routing, no service proxy, no CNI)."""
        return [
            str(self.binaries["kube-router"]),
            f"--kubeconfig={self.admin_kubeconfig}",
            "--run-firewall=true",
            "--run-router=false",
            "--run-service-proxy=false",
            "--enable-cni=false",
            f"--hostname-override={self.node_name}",
            "--health-port=0",
            "--metrics-port=0",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
        ]
