"""A fresh slice of every real server per test (base DN, Slurm cluster, namespace), a store, and the
settings file `sup serve` reads. The store is PostgreSQL: the production configuration."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sup.store import migrate
from tests.e2e.login_site import LoginSite, admit_host_to_idle_reporters, slurm_objects, slurm_pod_settings
from tests.e2e.stack import Stack
from tests.support.gateway_runner import RunningGateway, write_host_key
from tests.support.images import LOGIN_IMAGE, ImagesUnavailable, build_images
from tests.support.kubeapi import KubeApiServer
from tests.support.kubenode import KubeCluster
from tests.support.ports import free_port
from tests.support.slapd import SlapdServer
from tests.support.slurmctld import JobCluster
from tests.support.slurmdbd import SlurmdbdServer

_numbers = itertools.count(1)


@pytest.fixture
def make_stack(
    slapd_rfc2307bis: SlapdServer,
    slurmdbd: SlurmdbdServer,
    kubeapi: KubeApiServer,
    postgres_template: str,
    new_postgres_database: Callable[[bool], str],
    tmp_path: Path,
) -> Iterator[Callable[..., Stack]]:
    stacks: list[Stack] = []

    def make(**reconcile: Any) -> Stack:
        slurmdbd.reset(keep_clusters=[slurmdbd.cluster])
        cluster = f"e{next(_numbers)}"
        slurmdbd.sacctmgr("add", "cluster", cluster)
        database_url = new_postgres_database(True)
        migrate.upgrade(database_url)
        config: dict[str, Any] = {
            "database_url": database_url,
            "ldap": slapd_rfc2307bis.ldap_settings(slapd_rfc2307bis.new_base("e"), timeout_seconds=3),
            "slurm": {
                "cluster": cluster,
                "sacctmgr": slurmdbd.bin["sacctmgr"],
                "lock_dir": str(tmp_path / "locks"),
            },
            "kube": {"namespace": kubeapi.new_namespace("e"), "kubeconfig": str(kubeapi.admin_kubeconfig)},
            "reconcile": {
                "interval_seconds": 3600,
                "debounce_seconds": 0.2,
                "poll_seconds": 0.2,
                **reconcile,
            },
        }
        stack = Stack(slapd_rfc2307bis, slurmdbd, kubeapi, config, tmp_path)
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.stop()


@pytest.fixture
def stack(make_stack: Callable[..., Stack]) -> Stack:
    return make_stack()


@pytest.fixture
def make_job_stack(
    slurm_jobs: JobCluster,
    slurmdbd: SlurmdbdServer,
    postgres_template: str,
    new_postgres_database: Callable[[bool], str],
    tmp_path: Path,
) -> Iterator[Callable[..., Stack]]:
    """Factory: make_job_stack(slurm=None, **reconcile) -> a Stack without Kubernetes whose LDAP base
    and Slurm cluster are the real slurmctld's (`stack.jobs`), emptied first. Each stack allocates ids
    from ranges of its own, so that no uid means two people to the session's controller and sssd."""
    stacks: list[Stack] = []

    def make(slurm: dict[str, Any] | None = None, **reconcile: Any) -> Stack:
        slurm_jobs.reset()
        slurmdbd.reset(keep_clusters=[slurmdbd.cluster])
        number = next(_numbers)
        database_url = new_postgres_database(True)
        migrate.upgrade(database_url)
        config: dict[str, Any] = {
            "database_url": database_url,
            "ldap": dict(slurm_jobs.ldap),
            "slurm": {
                "cluster": slurm_jobs.cluster,
                "sacctmgr": slurmdbd.bin["sacctmgr"],
                "lock_dir": str(tmp_path / "locks"),
                **(slurm or {}),
            },
            "ids": {
                "uid_range": {"min": 20000 + 100 * number, "max": 20099 + 100 * number},
                "gid_range": {"min": 60000 + 100 * number, "max": 60099 + 100 * number},
            },
            "reconcile": {
                "interval_seconds": 3600,
                "debounce_seconds": 0.2,
                "poll_seconds": 0.2,
                **reconcile,
            },
        }
        stack = Stack(slurm_jobs.slapd, slurmdbd, None, config, tmp_path, jobs=slurm_jobs)
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.stop()


@pytest.fixture(scope="session")
def login_image(kube_cluster: KubeCluster) -> str:
    """SUP's login image (scripts/build-images, cached), imported into the test node."""
    try:
        images = build_images()
    except ImagesUnavailable as exc:
        pytest.skip(str(exc))
    kube_cluster.import_image(images.login)
    return LOGIN_IMAGE


@pytest.fixture
def make_login_site(
    make_job_stack: Callable[..., Stack], kube_cluster: KubeCluster, login_image: str, tmp_path: Path
) -> Callable[..., LoginSite]:
    """Factory: make_login_site(pod_security="restricted", **kube) -> a LoginSite (not started): a job
    stack whose `kube` section provisions into a fresh namespace of the real node, with Slurm's client
    configuration and munge key there (tests/e2e/login_site.py)."""

    def make(pod_security: str = "restricted", **kube: Any) -> LoginSite:
        stack = make_job_stack()
        assert stack.jobs is not None
        controller = stack.jobs.controller
        namespace = kube_cluster.new_namespace("login", pod_security=pod_security)
        slurm_objects(
            kube_cluster, namespace, controller.client_conf(kube_cluster.pod_gateway), controller.munge_key
        )
        stack.kube_server = kube_cluster.apiserver
        stack.config["kube"] = {
            "namespace": namespace,
            "kubeconfig": str(kube_cluster.kubeconfig),
            **kube_cluster.login_settings(login_image),
            **slurm_pod_settings(kube_cluster, controller),
            **kube,
        }
        return LoginSite(stack, kube_cluster, tmp_path)

    return make


GatewaySite = tuple[LoginSite, RunningGateway]


@pytest.fixture
def make_gateway_site(
    make_login_site: Callable[..., LoginSite], kube_cluster: KubeCluster, tmp_path: Path
) -> Iterator[Callable[..., GatewaySite]]:
    """Factory: make_gateway_site(pod_security=..., gateway={...}, idle_seconds=1,
    heartbeat_seconds=1, settings={...}, **kube) -> (a started login site whose SUP sleeps idle pods,
    the gateway in this process in front of it, both with those idle and heartbeat seconds).
    `settings`: more of SUP's top-level sections (e.g. `oidc`, `ssh_ca`). The gateway's port is
    chosen first, so SUP's `gateway.public_host` (127.0.0.1:PORT) is where it listens."""
    gateways: list[RunningGateway] = []

    def make(
        pod_security: str = "restricted",
        gateway: dict[str, Any] | None = None,
        idle_seconds: int = 1,
        heartbeat_seconds: float = 1,
        settings: dict[str, Any] | None = None,
        **kube: Any,
    ) -> GatewaySite:
        site = make_login_site(pod_security=pod_security, **kube)
        port = free_port()
        site.stack.config["gateway"] = {
            "idle_seconds": idle_seconds,
            "heartbeat_seconds": heartbeat_seconds,
            "wake_timeout_seconds": 150,
            "public_host": f"127.0.0.1:{port}",
        }
        site.stack.config.update(settings or {})
        site.start(host="0.0.0.0")
        assert site.server is not None
        # The chart's gateway NetworkPolicy admits the gateway's pods to sshd and the idle reporter;
        # here the gateway runs on the host, whose address kube.ssh_sources admits to sshd only.
        admit_host_to_idle_reporters(site.cluster, site.namespace, "test-gateway")
        token = site.stack.token("gateway")["Authorization"].removeprefix("Bearer ")
        running = RunningGateway(
            site.server.url,
            write_host_key(tmp_path / f"gateway_host_key-{len(gateways)}"),
            token=token,
            address=None,  # its own: gateway.pod_address, {service}.{namespace}.svc at the route's port
            resolve=site.cluster.resolve,  # looked up in the cluster's DNS at each attempt, as in a pod
            port=port,
            **{"wake_timeout_seconds": 150, "heartbeat_seconds": heartbeat_seconds, **(gateway or {})},
        )
        gateways.append(running)
        return site, running

    yield make
    for running in gateways:
        running.stop()
