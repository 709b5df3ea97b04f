"""The Kubernetes target against a real kube-apiserver: what a pass writes, that the next writes
nothing, settings changes, deactivation, and what SUP does with objects it did not create."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from sup.reconcile.planner import run_pass
from sup.targets.kube.render import Renderer
from sup.targets.kube.settings import KubeSettings
from tests.kube.site import Site
from tests.support.keys import ed25519_key


def _pod(site: Site, workload: str) -> dict[str, Any]:
    sts = site.get("workload", workload)
    assert sts is not None, f"StatefulSet {workload} is missing"
    template: dict[str, Any] = sts["spec"]["template"]
    return template


def test_a_pass_creates_home_pod_service_and_policy_for_each_user(site: Site) -> None:
    key = ed25519_key("kim@laptop")
    site.add_user("kim", ssh_public_keys=[key])
    site.add_user("a_b", home_directory="/home/a_b")
    site.add_group("physics", members=["kim"])

    result = site.converge()

    hashed = "a-b---648fa9b31b"  # "a_b" is no DNS name: a slug and a hash of the exact name
    assert site.names("pvc") == {site.home("kim"), site.home("a_b")}
    for kind in ("workload", "service", "network_policy"):
        assert site.names(kind) == {"login-kim", f"login-{hashed}"}
    assert site.names("login_config") >= {"login-kim", f"login-{hashed}"}
    assert len(result.changes) == 10 and {c.action for c in result.changes} == {"create"}

    pvc = site.get("pvc", site.home("kim"))
    assert pvc is not None
    assert pvc["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    labels = pvc["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "sup" and labels["sup/user"] == "kim"
    odd = site.get("pvc", site.home("a_b"))
    assert odd is not None and odd["metadata"]["annotations"]["sup/username"] == "a_b"

    pod = _pod(site, "login-kim")
    spec = pod["spec"]
    security = spec["securityContext"]
    assert (security["runAsUser"], security["runAsGroup"], security["fsGroup"]) == (10000, 10000, 10000)
    assert security["runAsNonRoot"] is True and security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    (container,) = spec["containers"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"] == {
        "limits": {"cpu": "4", "memory": "8Gi"},
        "requests": {"cpu": "4", "memory": "8Gi"},
    }
    assert container["volumeMounts"] == [
        {"name": "home", "mountPath": "/home/kim"},
        {"name": "login", "mountPath": "/etc/sup/login", "readOnly": True},
    ]
    assert spec["volumes"][0] == {"name": "home", "persistentVolumeClaim": {"claimName": site.home("kim")}}
    assert spec["volumes"][1]["configMap"]["name"] == "login-kim"
    files = site.get("login_config", "login-kim")
    assert files is not None and files["metadata"]["labels"]["sup/user"] == "kim"
    physics = site.gid("physics")
    assert files["data"] == {
        "passwd": "kim:x:10000:10000:kim:/home/kim:/bin/bash\n",
        "group": f"kim:x:10000:\nphysics:x:{physics}:kim\n",
        "kim.keys": key + "\n",
    }
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["SUP_USER"] == "kim" and env["SUP_SSH_PORT"] == "2222"
    # forwarding by default: ssh -L and -D, not -R; the person's agent (docs/login-pods.md)
    assert (env["SUP_SSH_ALLOW_TCP_FORWARDING"], env["SUP_SSH_ALLOW_AGENT_FORWARDING"]) == ("local", "yes")
    assert _pod(site, f"login-{hashed}")["spec"]["securityContext"]["runAsUser"] == 10001

    service = site.get("service", "login-kim")
    assert service is not None and service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"][0]["port"] == 22 and service["spec"]["ports"][0]["targetPort"] == 2222
    assert service["spec"]["selector"] == pod["metadata"]["labels"]

    policy = site.get("network_policy", "login-kim")
    assert policy is not None
    assert policy["spec"]["podSelector"]["matchLabels"] == pod["metadata"]["labels"]
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"].get("ingress", []) == []  # no ssh_sources: nobody reaches sshd
    (dns,) = policy["spec"]["egress"]  # no LDAP, Slurm or other CIDRs configured: DNS only
    assert {p["port"] for p in dns["ports"]} == {53}

    assert site.statuses() == {"kim": ("in_sync", None), "a_b": ("in_sync", None)}


def test_settings_shape_the_objects(make_site: Callable[..., Site]) -> None:
    site = make_site(
        ssh_sources=["203.0.113.0/24"],
        ldap_cidrs=["10.1.0.10/32"],
        slurmctld_cidrs=["10.1.0.20/32"],
        egress_cidrs=["0.0.0.0/0"],
        cluster_cidrs=["127.0.0.0/8"],  # the test API server's: carved out of the egress (else refused)
        service_type="LoadBalancer",
        node_selector={"node.kubernetes.io/role": "login"},
        home_size="50Gi",
        home_storage_class="fast",
        home_access_mode="ReadWriteOncePod",
        image="registry.example.org/login:2",
        cpu="2",
        memory="4Gi",
        cpu_request="500m",
        ssh_tcp_forwarding="no",
        ssh_agent_forwarding=False,
    )
    site.add_user("kim")
    site.converge()

    pvc = site.get("pvc", site.home("kim"))
    assert pvc is not None and pvc["spec"]["storageClassName"] == "fast"
    assert pvc["spec"]["resources"]["requests"]["storage"] == "50Gi"
    assert pvc["spec"]["accessModes"] == ["ReadWriteOncePod"]
    spec = _pod(site, "login-kim")["spec"]
    assert spec["nodeSelector"] == {"node.kubernetes.io/role": "login"}
    container = spec["containers"][0]
    assert container["image"] == "registry.example.org/login:2"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert (env["SUP_SSH_ALLOW_TCP_FORWARDING"], env["SUP_SSH_ALLOW_AGENT_FORWARDING"]) == ("no", "no")
    assert container["resources"] == {
        "limits": {"cpu": "2", "memory": "4Gi"},
        "requests": {"cpu": "500m", "memory": "4Gi"},
    }
    service = site.get("service", "login-kim")
    assert service is not None and service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["externalTrafficPolicy"] == "Local"  # the client's address reaches the policy

    policy = site.get("network_policy", "login-kim")
    assert policy is not None
    (ssh,) = policy["spec"]["ingress"]
    assert ssh == {
        "from": [{"ipBlock": {"cidr": "203.0.113.0/24"}}],
        "ports": [{"protocol": "TCP", "port": 2222}],
    }
    dns, ldap, slurm, anywhere = policy["spec"]["egress"]
    assert ldap["to"] == [{"ipBlock": {"cidr": "10.1.0.10/32"}}]
    assert sorted(p["port"] for p in ldap["ports"]) == [389, 636]
    assert slurm["ports"] == [{"protocol": "TCP", "port": 6817}]
    assert anywhere == {
        "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32", "127.0.0.0/8"]}}]
    }
    assert dns["to"][0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "kube-system"}


def test_changed_settings_update_the_objects_and_drop_what_sup_no_longer_sets(
    make_site: Callable[..., Site],
) -> None:
    site = make_site(node_selector={"pool": "login"}, image="login:1")
    site.add_user("kim")
    site.converge()

    site.with_kube(node_selector={}, image="login:2")
    plan = site.plan()
    (change,) = plan.changes
    assert (change.action, change.kind, change.name, change.subject) == (
        "update",
        "workload",
        "login-kim",
        "kim",
    )
    assert change.details_json()["spec.template.spec.containers[sshd].image"] == {
        "old": "login:1",
        "new": "login:2",
    }

    site.converge()
    spec = _pod(site, "login-kim")["spec"]
    assert spec["containers"][0]["image"] == "login:2"
    assert "nodeSelector" not in spec  # SUP owned it, no longer sets it: removed


def test_hand_edits_and_deletions_are_repaired(site: Site) -> None:
    site.add_user("kim")
    site.add_user("saul")
    site.converge()
    with site.admin() as admin:
        admin.merge_patch(
            site.path("workload", "login-kim"),
            {"spec": {"template": {"spec": {"containers": [{"name": "sshd", "image": "evil:latest"}]}}}},
            fieldManager="kubectl-edit",
        )
        admin.json_patch(  # somebody opens sshd to the world
            site.path("network_policy", "login-kim"),
            [
                {
                    "op": "add",
                    "path": "/spec/ingress",
                    "value": [{"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}],
                }
            ],
            fieldManager="kubectl-edit",
        )
        admin.json_patch(  # and takes SUP's label off a Service
            site.path("service", "login-saul"),
            [{"op": "remove", "path": "/metadata/labels/app.kubernetes.io~1managed-by"}],
        )
        admin.delete(site.path("workload", "login-saul"))
        admin.delete(site.path("pvc", site.home("saul")))  # stays Terminating: the pvc-protection finalizer

    plan = site.plan()
    found = {(c.action.value, c.kind, c.name): c for c in plan.changes}
    assert set(found) == {
        ("update", "workload", "login-kim"),
        ("update", "network_policy", "login-kim"),
        ("update", "service", "login-saul"),
        ("create", "workload", "login-saul"),
        ("report", "pvc", site.home("saul")),
    }
    assert found["update", "workload", "login-kim"].details_json()[
        "spec.template.spec.containers[sshd].image"
    ] == {
        "old": "evil:latest",
        "new": "localhost/sup-login:0.1.0",
    }
    assert "being deleted" in found["report", "pvc", site.home("saul")].details_json()["reason"]

    result = site.reconcile()
    assert result.ok and len(result.targets[0].applied) == 4  # the report writes nothing
    assert _pod(site, "login-kim")["spec"]["containers"][0]["image"] == "localhost/sup-login:0.1.0"
    policy = site.get("network_policy", "login-kim")
    assert policy is not None and policy["spec"].get("ingress", []) == []
    service = site.get("service", "login-saul")
    assert service is not None and service["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "sup"
    assert "login-saul" in site.names("workload")

    # the claim goes once its finalizer is removed (the controller-manager does that in a cluster)
    with site.admin() as admin:
        admin.merge_patch(site.path("pvc", site.home("saul")), {"metadata": {"finalizers": None}})
    assert site.home("saul") not in site.names("pvc")
    plan = site.plan()
    assert [(c.action, c.kind, c.name) for c in plan.changes] == [("create", "pvc", site.home("saul"))]
    site.converge()
    assert site.home("saul") in site.live_names("pvc")


def test_deactivation_removes_the_pod_and_keeps_the_home(site: Site) -> None:
    site.add_user("kim")
    site.add_user("saul")
    site.converge()

    site.update_user("kim", active=False)
    plan = site.plan()
    assert [(c.action, c.kind, c.name) for c in plan.changes] == [
        ("update", "pvc", site.home("kim")),  # marked: orphaned since now
        ("delete", "workload", "login-kim"),
        ("delete", "service", "login-kim"),
        ("delete", "network_policy", "login-kim"),
        ("delete", "login_config", "login-kim"),
    ]
    assert {c.subject for c in plan.changes} == {"kim"}

    site.converge()
    for kind in ("workload", "service", "network_policy"):
        assert site.names(kind) == {"login-saul"}
    assert "login-kim" not in site.names("login_config")
    pvc = site.get("pvc", site.home("kim"))
    assert pvc is not None and not pvc["metadata"].get("deletionTimestamp")
    assert "sup/orphaned-since" in pvc["metadata"]["annotations"]
    assert site.statuses()["kim"] == ("in_sync", None)

    # back before any retention: the same home, unmarked, and a pod again
    site.update_user("kim", active=True)
    site.converge()
    pvc_again = site.get("pvc", site.home("kim"))
    assert pvc_again is not None and pvc_again["metadata"]["uid"] == pvc["metadata"]["uid"]
    assert "sup/orphaned-since" not in pvc_again["metadata"]["annotations"]
    assert "login-kim" in site.names("workload")


def test_a_home_is_deleted_only_after_the_retention(make_site: Callable[..., Site]) -> None:
    import datetime

    site = make_site(pvc_retention="30d")
    site.now = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
    site.add_user("kim")
    site.add_user("saul")
    site.converge()
    kim, saul = site.home("kim"), site.home("saul")

    site.update_user("kim", active=False)
    site.delete_user("saul")  # removed from the store altogether: the same rule
    site.converge()
    for name in (kim, saul):
        pvc = site.get("pvc", name)
        assert (
            pvc is not None and pvc["metadata"]["annotations"]["sup/orphaned-since"] == "2026-01-01T12:00:00Z"
        )

    site.now += datetime.timedelta(days=29, hours=23)
    assert site.plan().changes == []

    site.now += datetime.timedelta(hours=1)
    plan = site.plan()
    assert sorted((c.action, c.kind, c.name, c.subject) for c in plan.changes) == [
        ("delete", "pvc", kim, "kim"),
        ("delete", "pvc", saul, "saul"),
    ]
    site.reconcile()
    assert site.live_names("pvc") == set()  # deleted (their finalizer holds them here, as in a cluster
    assert site.plan().changes == []  # while a pod still uses them); nothing more to do


def test_keep_never_deletes_a_home(make_site: Callable[..., Site]) -> None:
    import datetime

    site = make_site()  # pvc_retention: keep
    site.now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    site.add_user("kim")
    site.converge()
    site.update_user("kim", active=False)
    site.converge()
    site.now += datetime.timedelta(days=3650)
    assert site.plan().changes == []
    assert site.home("kim") in site.live_names("pvc")


def test_objects_sup_did_not_create_are_never_touched(site: Site) -> None:
    site.add_user("kim")
    site.add_user("saul")
    with site.admin() as admin:
        theirs = admin.create(
            site.path("pvc"),
            {"metadata": {"name": site.home("kim")},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
        )  # fmt: skip
        # somebody's own policy that happens to carry SUP's label
        labelled = admin.create(
            site.path("network_policy"),
            {"metadata": {"name": "login-zed", "labels": {"app.kubernetes.io/managed-by": "sup"}},
             "spec": {"podSelector": {}}},
        )  # fmt: skip

    plan = site.plan()
    reports = {(c.kind, c.name): c.details_json() for c in plan.changes if c.action == "report"}
    assert set(reports) == {("pvc", site.home("kim")), ("workload", "login-kim")}
    assert "SUP did not create it" in reports["pvc", site.home("kim")]["error"]
    assert not any(c.name == "login-zed" for c in plan.changes)

    result = site.reconcile()
    assert not result.ok  # a failed change: `sup reconcile` exits 8
    state, error = site.statuses()["kim"]
    assert state == "error" and error is not None and site.home("kim") in error
    assert site.statuses()["saul"] == ("in_sync", None)
    assert "login-kim" not in site.names("workload")  # no pod without its home
    pvc = site.get("pvc", site.home("kim"))
    assert pvc is not None and pvc["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
    policy = site.get("network_policy", "login-zed")
    assert (
        policy is not None
        and policy["metadata"]["resourceVersion"] == labelled["metadata"]["resourceVersion"]
    )


def test_the_deletion_limit_holds_mass_deactivations(make_site: Callable[..., Site]) -> None:
    site = make_site()
    site.settings = site.settings.model_copy(
        update={"reconcile": site.settings.reconcile.model_copy(update={"max_deletions": 5})}
    )
    for name in ("ann", "bob"):
        site.add_user(name)
    site.converge()
    for name in ("ann", "bob"):
        site.update_user(name, active=False)
    refused = site.reconcile()
    (target,) = refused.targets
    assert target.state == "refused" and "more than reconcile.max_deletions=5" in (target.error or "")
    assert site.names("workload") == {"login-ann", "login-bob"}
    site.reconcile(force=True)
    assert site.names("workload") == set()


def test_a_pass_does_not_render_again_what_it_found_in_sync(site: Site, monkeypatch: Any) -> None:
    """The memo (sup/targets/kube/memo.py): objects a pass found in sync, whose user and whose copy on
    the API server have not changed since, are neither rendered nor compared again; a changed user's
    objects are (the hand edits and settings tests above show drift and new settings still count)."""
    site.add_user("kim")
    site.add_user("saul")
    site.converge()  # its second pass found everything in sync
    rendered: list[str] = []
    original = Renderer._render

    def counting(self: Renderer, kind: str, *args: Any, **kwargs: Any) -> Any:
        rendered.append(kind)
        return original(self, kind, *args, **kwargs)

    monkeypatch.setattr(Renderer, "_render", counting)
    assert site.plan().changes == []
    assert rendered == []

    site.update_user("kim", display_name="Kim Wexler")
    (change,) = site.plan().changes  # the gecos in kim's login files; nothing else differs
    assert (change.action, change.kind, change.name) == ("update", "login_config", "login-kim")
    assert change.details_json()["data.passwd"]["new"] == "kim:x:10000:10000:Kim Wexler:/home/kim:/bin/bash\n"
    assert sorted(rendered) == ["network_policy", "pvc", "service", "workload"]  # kim's only


def test_keys_change_the_login_files_only_and_memberships_the_pods_groups_too(site: Site) -> None:
    """A new key reaches the running pod through its ConfigMap (the kubelet refreshes a mounted
    ConfigMap in place): the StatefulSet is not written, so the pod is not restarted. A new group
    changes the files and the pod's supplementalGroups (sshd, running as the user, cannot set its
    groups): the pod restarts with it."""
    first, second = ed25519_key("kim@laptop"), ed25519_key("kim@desktop")
    site.add_user("kim", ssh_public_keys=[first])
    site.add_user("saul")
    site.add_group("physics", members=["saul"])
    site.converge()
    before = site.versions()

    site.update_user("kim", ssh_public_keys=[first, second])
    result = site.converge()

    assert {(c.action, c.kind, c.name) for c in result.changes} == {("update", "login_config", "login-kim")}
    after = site.versions()
    changed = {key for key in after if after[key] != before.get(key)}
    assert changed == {("login_config", "login-kim")}
    files = site.get("login_config", "login-kim")
    assert files is not None
    assert files["data"]["kim.keys"] == "".join(f"{k}\n" for k in sorted([first, second]))
    site.update_user("kim", ssh_public_keys=[second])
    site.converge()
    files = site.get("login_config", "login-kim")
    assert files is not None and files["data"]["kim.keys"] == f"{second}\n"

    site.update_group("physics", members=["kim", "saul"])
    result = site.converge()
    assert {(c.action, c.kind, c.name) for c in result.changes} == {
        ("update", "login_config", "login-kim"),
        ("update", "workload", "login-kim"),
    }
    files = site.get("login_config", "login-kim")
    assert files is not None
    assert f"physics:x:{site.gid('physics')}:kim\n" in files["data"]["group"]  # saul is not in this pod
    workload = site.get("workload", "login-kim")
    assert workload is not None
    pod_security = workload["spec"]["template"]["spec"]["securityContext"]
    assert pod_security["supplementalGroups"] == [site.gid("physics")]
    assert site.converge().changes == []


def test_a_pass_after_writes_reads_and_plans_only_the_users_they_named(site: Site) -> None:
    """The reconciler's passes after writes (run_pass scoped=True): only the users the outbox names
    are read (by name) and planned; drift elsewhere waits for the scheduled full pass."""
    site.add_user("kim")
    site.add_user("saul")
    site.converge()
    assert run_pass(site.settings, site.sessions, apply=True, opener=site._open).ok  # clears the outbox
    with site.admin() as admin:
        admin.delete(site.path("service", "login-saul"))  # drift nobody reported
    site.add_user("lalo")
    site.update_user("kim", active=False)

    scoped = run_pass(site.settings, site.sessions, apply=True, scoped=True, opener=site._open)
    (kube,) = [t for t in scoped.targets if t.target == "kube"]
    assert kube.scoped and kube.state == "applied"
    assert {(c.action, c.kind, c.name) for c in kube.changes} == {
        ("create", "pvc", site.home("lalo")),
        ("create", "network_policy", "login-lalo"),
        ("create", "login_config", "login-lalo"),
        ("create", "service", "login-lalo"),
        ("create", "workload", "login-lalo"),
        ("delete", "workload", "login-kim"),
        ("delete", "service", "login-kim"),
        ("delete", "network_policy", "login-kim"),
        ("delete", "login_config", "login-kim"),
        ("update", "pvc", site.home("kim")),  # marked orphaned: the home is kept for the retention
    }
    assert site.get("service", "login-saul") is None  # not named: not looked at
    assert site.statuses()["lalo"][0] == "in_sync"

    full = run_pass(site.settings, site.sessions, apply=True, opener=site._open)
    (kube,) = [t for t in full.targets if t.target == "kube"]
    assert not kube.scoped and {(c.action, c.name) for c in kube.changes} == {("create", "login-saul")}
    assert site.get("service", "login-saul") is not None


def test_with_login_groups_only_their_members_get_a_home_and_a_login_pod(
    make_site: Callable[..., Site],
) -> None:
    """`kube.login_groups`: the others have no Kubernetes objects (they stay in LDAP and Slurm); one
    who joins gets them, one who leaves loses the login pod and keeps the home."""
    site = make_site(login_groups=["gpu-login"])
    site.add_user("kim")
    site.add_user("saul")
    site.add_group("gpu-login", members=["kim"])
    site.converge()
    assert site.names("workload") == {"login-kim"}
    assert site.names("pvc") == {site.home("kim")}

    site.update_group("gpu-login", members=["kim", "saul"])
    site.converge()
    assert site.names("workload") == {"login-kim", "login-saul"}
    saul_home = site.home("saul")

    site.update_group("gpu-login", members=["kim"])
    site.converge()
    assert site.names("workload") == {"login-kim"}
    assert site.names("login_config") == {"login-kim"}
    assert saul_home in site.names("pvc")  # kept (pvc_retention: keep)
    assert site.converge().changes == []


def test_login_groups_must_be_posix_names() -> None:
    with pytest.raises(ValidationError, match="login_groups"):
        KubeSettings(namespace="n", login_groups=["Not A Group"])


def test_joining_a_shared_group_keeps_the_pass_scoped_to_who_joined(site: Site) -> None:
    """A member list's change names who joined or left (a `members` mark): the pass after it reads
    and writes their objects only, and the other members' login files, which list the group with
    their own name alone, stay as they are. The group's own change (a new gid, which every member's
    files list) still makes the pass read the whole namespace."""
    site.add_user("kim")
    site.add_user("saul")
    site.add_group("physics", members=["saul"])
    site.converge()
    assert run_pass(site.settings, site.sessions, apply=True, opener=site._open).ok  # clears the outbox
    before = site.versions()

    site.update_group("physics", members=["kim", "saul"])
    scoped = run_pass(site.settings, site.sessions, apply=True, scoped=True, opener=site._open)
    (kube,) = [t for t in scoped.targets if t.target == "kube"]
    assert kube.scoped and kube.state == "applied"
    assert {(c.action, c.kind, c.name) for c in kube.changes} == {
        ("update", "login_config", "login-kim"),
        ("update", "workload", "login-kim"),  # her pod's supplementalGroups
    }
    files = site.get("login_config", "login-kim")
    assert files is not None and f"physics:x:{site.gid('physics')}:kim\n" in files["data"]["group"]
    after = site.versions()
    assert {key for key in after if after[key] != before.get(key)} == {
        ("login_config", "login-kim"),
        ("workload", "login-kim"),
    }

    site.update_group("physics", gid_number=site.gid("physics") + 1)
    renumbered = run_pass(site.settings, site.sessions, apply=True, scoped=True, opener=site._open)
    (kube,) = [t for t in renumbered.targets if t.target == "kube"]
    assert not kube.scoped and kube.state == "applied"
    assert {c.name for c in kube.changes if c.kind == "login_config"} == {"login-kim", "login-saul"}
    assert site.converge().changes == []
