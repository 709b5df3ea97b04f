"""`sup homes serve`'s loop against a real kube-apiserver, as the chart runs it: with a token of the
chart's `<fullname>-homes` ServiceAccount (its Role: get/list/watch ConfigMaps, nothing else), it
lists SUP's login ConfigMaps, then watches them, and a new person's directory exists within a
second or two of their ConfigMap; a rename moves it; a removal leaves it."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sup.config.home_dirs import HomeDirsSettings
from sup.home_dirs.service import Server
from sup.home_dirs.source import ConfigMaps
from tests.support.helm import apply_objects, render
from tests.support.kubeapi import Admin, ApiError, KubeApiServer, collection

pytestmark = pytest.mark.usefixtures("as_root")

LOGIN = {"app.kubernetes.io/managed-by": "sup", "app.kubernetes.io/component": "login"}
GROUP = {"app.kubernetes.io/managed-by": "sup", "app.kubernetes.io/component": "group-login"}


def line(name: str, uid: int, home: str) -> str:
    return f"{name}:x:{uid}:{uid}:{name}:{home}:/bin/bash\n"


@pytest.fixture
def maker(kubeapi: KubeApiServer, helm_binary: str, tmp_path: Path) -> Iterator[tuple[str, Path, ConfigMaps]]:
    """The chart's homes RBAC in a fresh users' namespace, and a running Server with its token."""
    users = kubeapi.new_namespace("users", pod_security=None)
    release = kubeapi.new_namespace("sup-system", pod_security=None)
    objects = render(
        helm_binary, release, f"kube.namespace={users}", "kube.createNamespace=false",
        "kube.settings.home_mode=shared", "kube.settings.shared_home_claim=homes",
    )  # fmt: skip
    rbac = [
        o for o in objects
        if o["kind"] in ("ServiceAccount", "Role", "RoleBinding") and o["metadata"]["name"].endswith("-homes")
    ]  # fmt: skip
    assert len(rbac) == 3
    with kubeapi.admin() as admin:
        apply_objects(admin, rbac, release)
    token = kubeapi.service_account_token(users, "sup-homes")
    kubeconfig = kubeapi.write_kubeconfig(tmp_path / "homes.kubeconfig", token=token)
    mount = tmp_path / "homes"
    mount.mkdir()
    settings = HomeDirsSettings(
        namespace=users, kubeconfig=str(kubeconfig), mount=str(mount), metrics_port=None
    )
    source = ConfigMaps(settings)
    server = Server(settings, source)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    yield users, mount, source
    server.stop.set()
    source.close()
    thread.join(5)


def _put(admin: Admin, namespace: str, name: str, labels: dict[str, str], passwd: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels},
            "data": {"passwd": passwd, "group": ""}}  # fmt: skip
    admin.apply(f"{collection(namespace, 'configmaps')}/{name}", body)


def _within(seconds: float, check: Callable[[], bool]) -> float:
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if check():
            return time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError(f"not within {seconds} s")


def _owner(path: Path) -> int | None:
    try:
        return os.lstat(path).st_uid
    except FileNotFoundError:
        return None


def test_serve_follows_the_login_config_maps(
    kubeapi: KubeApiServer, maker: tuple[str, Path, ConfigMaps]
) -> None:
    users, mount, source = maker
    with kubeapi.admin() as admin:
        _put(admin, users, "login-2001", LOGIN, line("alice", 2001, "/home/alice"))
        took = _within(10, lambda: _owner(mount / "alice") == 2001)
        assert took < 3, f"alice's home took {took:.1f} s"
        # a group pod's file names its members too
        _put(
            admin,
            users,
            "group-lab",
            GROUP,
            line("alice", 2001, "/home/alice") + line("bob", 2002, "/home/bob"),
        )
        _within(10, lambda: _owner(mount / "bob") == 2002)
        # a ConfigMap that is not SUP's login file says nothing
        _put(admin, users, "other", {"app": "x"}, line("mallory", 2003, "/home/mallory"))
        (mount / "alice" / "job.sh").write_text("echo hi\n")
        # alice becomes alicia: both of her files change, then her directory follows
        _put(admin, users, "login-2001", LOGIN, line("alicia", 2001, "/home/alicia"))
        _put(
            admin,
            users,
            "group-lab",
            GROUP,
            line("alicia", 2001, "/home/alicia") + line("bob", 2002, "/home/bob"),
        )
        _within(10, lambda: (mount / "alicia" / "job.sh").exists())
        assert not (mount / "alice").exists()
        # bob's pod and files go: his directory stays
        admin.delete(f"{collection(users, 'configmaps')}/group-lab")
        time.sleep(1)
    assert _owner(mount / "bob") == 2002
    assert not (mount / "mallory").exists()
    # it read ConfigMaps only, as its Role allows
    assert set(source.client.requests) <= {("list", "configmaps"), ("watch", "configmaps")}


def test_the_makers_token_may_read_configmaps_there_and_nothing_else(
    kubeapi: KubeApiServer, maker: tuple[str, Path, ConfigMaps]
) -> None:
    users, _, _ = maker
    token = kubeapi.service_account_token(users, "sup-homes")
    with kubeapi.as_token(token) as api:
        assert api.items(collection(users, "configmaps")) == []
        for path in (
            collection(users, "secrets"),
            collection(users, "pods"),
            collection("default", "configmaps"),
        ):
            with pytest.raises(ApiError) as refused:
                api.items(path)
            assert refused.value.status == 403, path
        with pytest.raises(ApiError) as refused:
            api.create(collection(users, "configmaps"), {"metadata": {"name": "x"}, "data": {}})
        assert refused.value.status == 403
