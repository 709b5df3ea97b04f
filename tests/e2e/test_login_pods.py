"""People log in to the login pods SUP runs on the real test node, as themselves, and run Slurm jobs
from there: `ssh` through the pod's Service with their own key, `id` as the directory says, a home
that is theirs and outlives the pod, keys that follow the store, nothing in the pod that lets them act
as someone else, a NetworkPolicy the node enforces, and no login after deactivation."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import time
from collections.abc import Callable

from sup.targets.kube.render import shipped_templates
from tests.e2e.login_site import SSH_FAILED, LoginSite, Person, new_person
from tests.e2e.stack import wait_until
from tests.support.kubenode import KubeCluster

REFUSED = "Invalid account or account/partition combination specified"


def parsed_id(printed: str) -> tuple[str, str, frozenset[str]]:
    """`id` output as (uid, gid, groups): the order of the groups is NSS's, not a fact to compare."""
    match = re.fullmatch(r"uid=(\S+) gid=(\S+) groups=(\S+)", printed.strip())
    assert match, printed
    return match[1], match[2], frozenset(match[3].split(","))


def node_id(site: LoginSite, user: str) -> tuple[str, str, frozenset[str]]:
    """`id USER` on the Slurm node, through sssd reading SUP's LDAP: what the pod must agree with."""
    assert site.stack.jobs is not None
    printed = site.stack.jobs.sssd.id(user)
    assert printed, f"{user} is not known on the node"
    return parsed_id(printed)


def _onboard(site: LoginSite, alice: Person, bob: Person) -> None:
    """alice in `physics` (the Slurm account `phys`), bob in no group (no association)."""
    site.post("groups", {"name": "physics"})
    site.post("slurm/accounts", {"name": "phys", "group": "physics"})
    site.add(alice, "physics")
    site.add(bob)


def test_a_person_logs_in_to_their_own_pod_as_themselves_and_runs_jobs(
    make_login_site: Callable[..., LoginSite], kube_cluster: KubeCluster
) -> None:
    site = make_login_site().start(host="0.0.0.0")
    assert site.server is not None
    alice, bob = new_person(site.directory, "alice"), new_person(site.directory, "bob")
    started = time.monotonic()
    _onboard(site, alice, bob)
    site.wait_ready("login-alice")
    site.wait_ssh(alice, "login-alice")
    print(f"POST to ssh into the login pod: {time.monotonic() - started:.1f} s")

    # who they are in the pod: what the node's directory says (the pod reads SUP's maps, no daemon)
    assert parsed_id(site.ssh_ok(alice, "login-alice", "id")) == node_id(site, "alice")
    uid = node_id(site, "alice")[0].split("(")[0]
    home = site.ssh_ok(alice, "login-alice", "echo $HOME; touch ~/kept; stat -c '%U %u' ~/kept; ls -ld ~")
    lines = home.splitlines()
    assert lines[0] == "/home/alice" and lines[1] == f"alice {uid}", home
    assert lines[2].split()[2] in {"root", "alice"}  # the volume's root, group-writable through fsGroup

    # another person's key does not open alice's pod, nor alice's key bob's
    refused = site.ssh(bob, "login-alice", "id", as_user="alice")
    assert refused.returncode == SSH_FAILED and "Permission denied" in refused.stderr
    site.wait_ready("login-bob")
    site.wait_ssh(bob, "login-bob")
    assert site.ssh(alice, "login-bob", "id", as_user="bob").returncode == SSH_FAILED
    assert site.ssh(alice, "login-alice", "id", as_user="bob").returncode == SSH_FAILED  # AllowUsers

    # Slurm from the pod: the job runs on the node as alice; bob has no association
    assert site.stack.jobs is not None
    site.stack.jobs.controller.first_job("alice", "phys", timeout=60)  # the association reached slurmctld
    job = site.ssh(alice, "login-alice", "srun -A phys id", timeout=120)
    assert job.returncode == 0, (job.stdout, job.stderr)
    assert parsed_id(job.stdout) == node_id(site, "alice")
    batch = site.ssh(alice, "login-alice", "sbatch --wait --parsable -A phys -o /dev/null --wrap 'id'")
    assert batch.returncode == 0, (batch.stdout, batch.stderr)
    denied = site.ssh(bob, "login-bob", "srun -A phys id", timeout=120)
    assert denied.returncode != 0 and REFUSED in denied.stderr, (denied.stdout, denied.stderr)

    # the NetworkPolicy, enforced by the node: slurmctld is reachable (the control), bob's pod,
    # SUP's API (listening on every address of the host) and the Kubernetes API are not
    controller = site.stack.jobs.controller
    bob_ip = kube_cluster.api.get(f"/api/v1/namespaces/{site.namespace}/pods/login-bob-0")
    assert bob_ip is not None
    probes = {
        "slurmctld": (kube_cluster.pod_gateway, controller.ctld_port),
        "bob's sshd": (bob_ip["status"]["podIP"], 2222),
        "SUP's API": (kube_cluster.pod_gateway, site.server.port),
        "the Kubernetes API": ("10.96.0.1", 443),
    }
    reached = {
        what: site.ssh(
            alice, "login-alice", f"timeout 3 bash -c '</dev/tcp/{host}/{port}' 2>/dev/null && echo open"
        ).stdout.strip()
        == "open"
        for what, (host, port) in probes.items()
    }
    assert reached == {
        "slurmctld": True,
        "bob's sshd": False,
        "SUP's API": False,
        "the Kubernetes API": False,
    }

    # nothing in the pod lets alice act as someone else: no service-account token, no munge key in
    # any file she can read, no secret in her environment; munged gives her credentials as herself
    key = controller.munge_key
    scan = site.ssh_ok(
        alice,
        "login-alice",
        "find / \\( -path /proc -o -path /sys \\) -prune -o -type f -readable"
        f" -size {len(key)}c -print 2>/dev/null | xargs -r sha256sum;"
        " ls /var/run/secrets/kubernetes.io 2>&1; ls /etc/munge-key 2>&1; env;"
        " find / \\( -path /proc -o -path /sys \\) -prune -o -type s -print 2>/dev/null; true",
        timeout=120,
    )
    assert hashlib.sha256(key).hexdigest() not in scan
    assert "No such file or directory" in scan.split("/var/run/secrets")[0] or "cannot access" in scan
    assert not re.search(r"(?im)^[A-Z_]*(TOKEN|SECRET|PASSWORD|MUNGE_KEY)[A-Z_]*=", scan)
    sockets = {line for line in scan.splitlines() if line.startswith("/")}  # only find's paths start so
    assert sockets == {"/run/munge/munge.socket.2"}, scan
    credential = site.ssh_ok(alice, "login-alice", "munge -n | unmunge")
    assert re.search(rf"UID:\s+alice \({uid}\)", credential), credential

    # a key added and the old one removed: new logins follow within the kubelet's sync (the test node
    # syncs every 10 s; a default kubelet every 60 s), the pod is not restarted
    pod_uid = kube_cluster.api.get(f"/api/v1/namespaces/{site.namespace}/pods/login-alice-0")
    new_key = new_person(site.directory, "alice", "-new")
    changed = time.monotonic()
    site.patch("users/alice", {"ssh_public_keys": [new_key.public]})
    seconds = wait_until(
        lambda: site.ssh(new_key, "login-alice", "true").returncode == 0, timeout=60, what="the new key"
    )
    assert site.ssh(alice, "login-alice", "true").returncode == SSH_FAILED
    print(f"a key change to the first login with the new key: {time.monotonic() - changed:.1f} s")
    assert seconds < 60
    same_pod = kube_cluster.api.get(f"/api/v1/namespaces/{site.namespace}/pods/login-alice-0")
    assert pod_uid is not None and same_pod is not None
    assert same_pod["metadata"]["uid"] == pod_uid["metadata"]["uid"]

    # the pod deleted: a new one, the same home and the same host key (strict known_hosts)
    known = site.directory / "known_hosts-alice"
    site.ssh_ok(new_key, "login-alice", "true", known_hosts=known)
    kube_cluster.api.delete(f"/api/v1/namespaces/{site.namespace}/pods/login-alice-0")
    wait_until(
        lambda: (
            (kube_cluster.api.get(f"/api/v1/namespaces/{site.namespace}/pods/login-alice-0") or {})
            .get("metadata", {})
            .get("uid")
            not in (None, pod_uid["metadata"]["uid"])
        ),
        timeout=60,
        what="a new pod",
    )
    site.wait_ready("login-alice")
    site.wait_ssh(new_key, "login-alice")
    assert site.ssh_ok(new_key, "login-alice", "ls ~/kept", known_hosts=known).strip() == "/home/alice/kept"

    # deactivated: the pod and its Service go, the home stays, no login
    claim = site.stack.home_claim("alice")
    site.patch("users/alice", {"active": False})
    wait_until(lambda: site.gone("pods/login-alice-0"), timeout=60, what="alice's pod to go")
    assert site.gone("services/login-alice") and site.gone("configmaps/login-alice")
    assert claim is not None and not site.gone(f"persistentvolumeclaims/{claim}")
    bob_still = site.ssh_ok(bob, "login-bob", "id -un").strip()
    assert bob_still == "bob"


def test_members_of_a_group_log_in_to_its_pod_each_as_themselves(
    make_login_site: Callable[..., LoginSite],
) -> None:
    """A group pod (sshd as root for its members: Pod Security baseline): every member logs in as
    themselves with their own key; someone outside the group is refused. No member can make or
    change another's home; a member who joins while it runs gets theirs first; munge works without
    fsGroup; the host key from the site's Secret outlives the pod."""
    site = make_login_site(
        pod_security="baseline", group_pods=["physics"], group_host_key_secret="group-host-keys"
    )
    host_key = site.directory / "physics-host-key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True)
    site.cluster.api.create(
        f"/api/v1/namespaces/{site.namespace}/secrets",
        {
            "metadata": {"name": "group-host-keys"},
            "data": {"physics": base64.b64encode(host_key.read_bytes()).decode()},
        },
    )
    site.start()
    alice, bob, carol = (new_person(site.directory, n) for n in ("alice", "bob", "carol"))
    site.post("groups", {"name": "physics"})
    site.add(alice, "physics")
    site.add(bob, "physics")
    site.add(carol)
    site.wait_ready("group-physics")
    site.wait_ssh(alice, "group-physics")

    for person in (alice, bob):
        printed = site.ssh_ok(person, "group-physics", "id")
        assert parsed_id(printed) == node_id(site, person.name)
    assert site.ssh(carol, "group-physics", "id").returncode == SSH_FAILED
    assert site.ssh(alice, "group-physics", "id", as_user="bob").returncode == SSH_FAILED

    # alice tries to run code as bob (his home moved away and replaced, a .bashrc planted) and to
    # make a newcomer's home first: /home is root's and every home is its member's own, 0700
    attempt = (
        "mv /home/bob /home/.x; mkdir -p /home/dave/.ssh; echo 'touch /tmp/ran-as-$USER' > /home/bob/.bashrc;"
        " stat -c '%U %a' /home /home/alice /home/bob"
    )
    tried = site.ssh(alice, "group-physics", attempt)
    assert tried.stdout.splitlines() == ["root 755", "alice 700", "bob 700"], tried.stderr
    assert tried.stderr.count("Permission denied") == 3, tried.stderr
    dave = new_person(site.directory, "dave")
    site.add(dave, "physics")  # joins while the pod runs (the pod is not restarted for it)
    site.wait_ssh(dave, "group-physics", timeout=150)
    seen = site.ssh_ok(dave, "group-physics", "stat -c '%U %a' ~; ls -A ~; ls /tmp")
    assert seen.split() == ["dave", "700"]  # his own, empty; nothing ran as anyone
    # munge in a group's pod (no fsGroup: the key copied for the sidecar by its init container)
    credential = site.ssh_ok(bob, "group-physics", "munge -n | unmunge")
    assert re.search(r"UID:\s+bob \(", credential) and re.search(r"STATUS:\s+Success", credential), credential
    # root in that pod (sshd's uid) gets no credential: the munge guard refuses uid 0
    as_root = site.cluster.exec(site.namespace, "group-physics-0", ["munge", "-n"], container="sshd")
    assert as_root.returncode != 0 and "MUNGE:" not in as_root.stdout, as_root
    namespace = site.cluster.api.get(f"/api/v1/namespaces/{site.namespace}")
    assert namespace is not None
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"

    # the pod replaced: the site's host key again (strict known_hosts), the homes made again
    known = site.directory / "known_hosts-physics"
    site.ssh_ok(alice, "group-physics", "true", known_hosts=known)
    pod_path = f"/api/v1/namespaces/{site.namespace}/pods/group-physics-0"
    old_uid = (site.cluster.api.get(pod_path) or {})["metadata"]["uid"]
    site.cluster.api.delete(pod_path)
    wait_until(
        lambda: (site.cluster.api.get(pod_path) or {}).get("metadata", {}).get("uid") not in (None, old_uid),
        timeout=60,
        what="a new group pod",
    )
    site.wait_ready("group-physics")
    site.wait_ssh(bob, "group-physics")
    assert site.ssh_ok(alice, "group-physics", "stat -c '%U %a' ~", known_hosts=known).split() == [
        "alice",
        "700",
    ]


def test_a_login_pod_stuck_on_a_broken_template_is_replaced_once_it_is_fixed(
    make_login_site: Callable[..., LoginSite],
) -> None:
    """A StatefulSet rollout never replaces a crash-looping pod; SUP deletes it once the template
    has changed, and the person logs in again."""
    site = make_login_site()
    broken = site.directory / "broken-templates"
    broken.mkdir()
    template = (shipped_templates() / "user-statefulset.yaml.j2").read_text()
    assert '"name": "sshd",' in template
    (broken / "user-statefulset.yaml.j2").write_text(
        template.replace('"name": "sshd",', '"name": "sshd", "command": ["/bin/false"],', 1)
    )
    site.stack.config["kube"]["templates_dir"] = str(broken)
    site.start()
    dana = new_person(site.directory, "dana")
    site.add(dana)

    def crash_looping() -> bool:
        pod = site.cluster.api.get(f"/api/v1/namespaces/{site.namespace}/pods/login-dana-0") or {}
        states = pod.get("status", {}).get("containerStatuses", [])
        return any(s.get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff" for s in states)

    wait_until(crash_looping, timeout=120, what="dana's pod in CrashLoopBackOff")
    del site.stack.config["kube"]["templates_dir"]
    site.restart()
    # the restarted SUP's first pass applies the fixed template; the rollout then waits on the pod

    def rollout_stuck() -> bool:
        sts = site.cluster.api.get(f"/apis/apps/v1/namespaces/{site.namespace}/statefulsets/login-dana") or {}
        status = sts.get("status", {})
        return bool(
            status.get("observedGeneration") == sts.get("metadata", {}).get("generation")
            and status.get("updateRevision")
            and status.get("currentRevision") != status.get("updateRevision")
        )

    try:
        wait_until(rollout_stuck, timeout=60, what="the StatefulSet's rollout waiting on the stuck pod")
    except AssertionError:
        sts = site.cluster.api.get(f"/apis/apps/v1/namespaces/{site.namespace}/statefulsets/login-dana") or {}
        pod = site.cluster.api.get(f"/api/v1/namespaces/{site.namespace}/pods/login-dana-0") or {}
        raise AssertionError(
            f"sts {sts.get('metadata', {}).get('generation')} {sts.get('status')}\n"
            f"pod {pod.get('metadata', {}).get('labels')} {pod.get('status', {}).get('containerStatuses')}"
        ) from None
    assert crash_looping()  # the rollout alone does not replace it
    old_pod = site.cluster.api.get(f"/api/v1/namespaces/{site.namespace}/pods/login-dana-0")
    assert old_pod is not None
    site.reconcile("kube")  # the next pass (a scheduled one in production)
    wait_until(
        lambda: (
            (site.cluster.api.get(f"/api/v1/namespaces/{site.namespace}/pods/login-dana-0") or {})
            .get("metadata", {})
            .get("uid")
            not in (None, old_pod["metadata"]["uid"])
        ),
        timeout=60,
        what="the stuck pod replaced",
    )
    site.wait_ready("login-dana", timeout=120)
    site.wait_ssh(dana, "login-dana")  # the Service's endpoints follow the pod's readiness
    assert site.ssh_ok(dana, "login-dana", "id -un").strip() == "dana"
