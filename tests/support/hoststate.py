"""What a test Kubernetes node changes on the host, and how to put it back.

kubelet, kube-proxy, kube-router and the CNI plugins change host-wide state: sysctls, iptables chains
(`KUBE-*`, `CNI-*`), ipsets, a bridge and veths, network namespaces under /run/netns, mounts, and
cgroups (`kubepods`). `HostSnapshot` records what was there before the cluster started;
`restore()` removes what the cluster added and sets the sysctls back. `leftovers()` lists what is
still there that was not before (the teardown test asserts it is empty).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

# sysctls the kubelet, kube-proxy and the fixture itself set
SYSCTLS = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.route_localnet",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
)
# iptables chains of kube-proxy, kube-router (both KUBE-*) and the CNI plugins (CNI-*)
CHAIN_PREFIXES = ("KUBE-", "CNI-")
TABLES = ("filter", "nat", "mangle", "raw")
# directories the components create outside their configured roots when they are missing
STRAY_DIRS = (
    "/run/containerd",
    "/var/lib/cni",
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/usr/libexec/kubernetes",
    "/opt/containerd",
    "/etc/kubernetes",
    "/var/run/kubernetes",
    "/run/netns",  # only removed when empty: other network namespaces may live there
)
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_sysctls() -> dict[str, str]:
    values = {}
    for name in SYSCTLS:
        with contextlib.suppress(OSError):
            values[name] = _sysctl_path(name).read_text().strip()
    return values


def write_sysctl(name: str, value: str) -> None:
    _sysctl_path(name).write_text(value + "\n")


def _run(argv: list[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return result.stdout if result.returncode == 0 else ""


def _iptables_commands() -> list[str]:
    return [command for command in ("iptables", "ip6tables") if shutil.which(command)]


def chains() -> set[str]:
    """`iptables:TABLE:CHAIN` of every chain with one of CHAIN_PREFIXES (IPv4 and IPv6)."""
    found = set()
    for command in _iptables_commands():
        for table in TABLES:
            for line in _run([command, "-w", "-t", table, "-S"]).splitlines():
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "-N" and parts[1].startswith(CHAIN_PREFIXES):
                    found.add(f"{command}:{table}:{parts[1]}")
    return found


def remove_chains() -> None:
    """Delete the rules that jump to KUBE-*/CNI-* chains, then those chains."""
    for command in _iptables_commands():
        for table in TABLES:
            rules = [shlex.split(line) for line in _run([command, "-w", "-t", table, "-S"]).splitlines()]
            ours = [rule[1] for rule in rules if rule[:1] == ["-N"] and rule[1].startswith(CHAIN_PREFIXES)]
            for rule in rules:
                if rule[:1] == ["-A"] and not rule[1].startswith(CHAIN_PREFIXES) and set(ours) & set(rule):
                    _iptables(command, table, "-D", *rule[1:])
            for chain in ours:
                _iptables(command, table, "-F", chain)
            for chain in ours:
                _iptables(command, table, "-X", chain)


def _iptables(command: str, table: str, *args: str) -> None:
    subprocess.run([command, "-w", "-t", table, *args], capture_output=True, check=False)


def ipsets() -> set[str]:
    if not shutil.which("ipset"):
        return set()
    return set(_run(["ipset", "list", "-n"]).split())


def links() -> set[str]:
    return {path.name for path in Path("/sys/class/net").iterdir()}


def netns() -> set[str]:
    directory = Path("/run/netns")
    return {path.name for path in directory.iterdir()} if directory.is_dir() else set()


def mounts_under(*roots: Path) -> list[str]:
    """Mount points under the given directories, deepest first (the order to unmount them in)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == str(root) or point.startswith(f"{root}/") for root in roots):
            found.append(point)
    return sorted(set(found), key=lambda p: p.count("/"), reverse=True)


def unmount_under(*roots: Path) -> None:
    for _ in range(3):  # a bind mount can hide another under it: go round until none is left
        points = mounts_under(*roots)
        if not points:
            return
        for point in points:
            if subprocess.run(["umount", point], capture_output=True, check=False).returncode != 0:
                subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def cgroups(name: str = "kubepods") -> set[str]:
    """The hierarchies (cgroup v1 controllers, or the v2 root) that have a `name` cgroup."""
    found = set()
    if (CGROUP_ROOT / name).is_dir():
        found.add(str(CGROUP_ROOT / name))
    if CGROUP_ROOT.is_dir():
        for hierarchy in CGROUP_ROOT.iterdir():
            if (hierarchy / name).is_dir():
                found.add(str(hierarchy / name))
    return found


def remove_cgroup(path: Path) -> None:
    """rmdir a cgroup tree, deepest first (a cgroup with no processes left can be removed)."""
    for directory, subdirectories, _files in os.walk(path, topdown=False):
        for sub in subdirectories:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(directory, sub))
    with contextlib.suppress(OSError):
        os.rmdir(path)


def stray_dirs() -> set[str]:
    return {path for path in STRAY_DIRS if os.path.lexists(path)}


@dataclass
class HostSnapshot:
    sysctls: dict[str, str] = field(default_factory=read_sysctls)
    chains: set[str] = field(default_factory=chains)
    ipsets: set[str] = field(default_factory=ipsets)
    links: set[str] = field(default_factory=links)
    netns: set[str] = field(default_factory=netns)
    cgroups: set[str] = field(default_factory=cgroups)
    stray_dirs: set[str] = field(default_factory=stray_dirs)

    def save(self, path: Path) -> None:
        """Write the snapshot down, so that a later run can put the host back after a crash."""
        fields = {
            name: sorted(value) if isinstance(value, set) else value for name, value in vars(self).items()
        }
        path.write_text(json.dumps(fields))

    @classmethod
    def load(cls, path: Path) -> HostSnapshot:
        fields = json.loads(path.read_text())
        return cls(
            sysctls=dict(fields["sysctls"]),
            chains=set(fields["chains"]),
            ipsets=set(fields["ipsets"]),
            links=set(fields["links"]),
            netns=set(fields["netns"]),
            cgroups=set(fields["cgroups"]),
            stray_dirs=set(fields["stray_dirs"]),
        )

    def leftovers(self, root: Path) -> list[str]:
        """What the cluster added and is still there (empty once `restore` did its job)."""
        now = HostSnapshot()
        found = [
            f"sysctl {k}={v} (was {self.sysctls.get(k)})"
            for k, v in now.sysctls.items()
            if self.sysctls.get(k) != v
        ]
        found += [f"iptables chain {c}" for c in sorted(now.chains - self.chains)]
        found += [f"ipset {s}" for s in sorted(now.ipsets - self.ipsets)]
        found += [f"network interface {i}" for i in sorted(now.links - self.links)]
        found += [f"netns {n}" for n in sorted(now.netns - self.netns)]
        found += [f"cgroup {c}" for c in sorted(now.cgroups - self.cgroups)]
        found += [f"directory {d}" for d in sorted(now.stray_dirs - self.stray_dirs)]
        found += [f"mount {m}" for m in mounts_under(root)]
        if root.exists():
            found.append(f"directory {root}")
        return found

    def restore(self, root: Path, bridge: str) -> list[str]:
        """Remove what the cluster added (its processes must be gone); return what is left."""
        errors: list[str] = []
        for name in sorted(netns() - self.netns):
            unmount_under(Path("/run/netns") / name)
            with contextlib.suppress(OSError):
                (Path("/run/netns") / name).unlink()
        unmount_under(root)
        # only the cluster's bridge and the CNI plugin's veths: other interfaces are someone else's
        for link in sorted(
            name for name in links() - self.links if name == bridge or name.startswith("veth")
        ):
            subprocess.run(["ip", "link", "delete", link], capture_output=True, check=False)
        if chains() - self.chains:
            remove_chains()
        for name in sorted(ipsets() - self.ipsets):
            subprocess.run(["ipset", "destroy", name], capture_output=True, check=False)
        for path in sorted(cgroups() - self.cgroups):
            remove_cgroup(Path(path))
        for name, value in self.sysctls.items():
            try:
                if _sysctl_path(name).read_text().strip() != value:
                    write_sysctl(name, value)
            except OSError as exc:
                errors.append(f"sysctl {name}: {exc}")
        for path in sorted(stray_dirs() - self.stray_dirs):
            if path == "/run/netns":
                with contextlib.suppress(OSError):
                    os.rmdir(path)
            else:
                shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
        errors += self.leftovers(root)
        return errors


def kill_processes(root: Path, snapshot: HostSnapshot) -> None:
    """SIGKILL, by pid, the processes a cluster rooted at `root` left running: those whose command
    line names the root (its servers and containerd's shims) and those in the kubepods cgroups that
    did not exist before it (the containers)."""
    pids: set[int] = set()
    needle = str(root).encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in (proc / "cmdline").read_bytes():
                    pids.add(int(proc.name))
    for path in cgroups() - snapshot.cgroups:
        for procs in Path(path).rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(line) for line in procs.read_text().split())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
