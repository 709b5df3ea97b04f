"""The SSH gateway on the real test node: people reach their own login pod through one address with
`ssh -J` and their own key, the pod sleeps when idle and the next connection wakes it, the home
intact. SUP (`sup serve`) keeps the pods and answers the gateway; the gateway runs in this process
(`sup gateway`'s server) and reaches a pod by its headless Service's name, which its event loop
looks up in the cluster's DNS (CoreDNS on the node: the pod's own address once it is ready), as it
would inside the cluster. And a site upgraded from login Services with a ClusterIP: a session held
through the old Service survives SUP replacing it, or a reconnect lands."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sup.gateway import PodRoute
from tests.e2e.conftest import GatewaySite
from tests.e2e.login_site import SSH_FAILED, LoginSite, Through, new_person
from tests.support.gateway_runner import RunningGateway, write_host_key


def test_through_the_gateway_to_their_own_pod_then_asleep_and_woken_with_the_home_kept(
    make_gateway_site: Callable[..., GatewaySite], tmp_path: Path
) -> None:
    # heartbeats longer than a short session, idle_seconds longer than the gap between two
    site, gateway = make_gateway_site(idle_seconds=8, heartbeat_seconds=3)
    alice, bob = new_person(site.directory, "alice"), new_person(site.directory, "bob")
    site.add(alice)
    site.add(bob)
    site.wait_ready("login-alice")
    site.wait_ssh(alice, "login-alice")  # its sshd answers (directly) before the gateway is tried
    through = Through(tmp_path, alice, gateway.port)

    landed = through.ssh("alice", "id -un; hostname; touch ~/kept")
    assert landed.returncode == 0, landed.stderr
    assert landed.stdout.split() == ["alice", "login-alice-0"]

    # scp both ways through the same hop
    sent = tmp_path / "notes.txt"
    sent.write_text("through the gateway\n")
    assert through.scp(str(sent), "alice@login:notes.txt").returncode == 0
    back = tmp_path / "back.txt"
    copied = through.scp("alice@login:notes.txt", str(back))
    assert copied.returncode == 0, copied.stderr
    assert back.read_text() == "through the gateway\n"

    # sftp and rsync (in the login image) through it too; rsync's second run sends nothing
    listed = through.sftp("alice@login", "ls -1 notes.txt\n")
    assert listed.returncode == 0, listed.stderr
    assert "notes.txt" in listed.stdout.splitlines()
    tree = tmp_path / "tree"
    (tree / "run").mkdir(parents=True)
    (tree / "run" / "weights.bin").write_bytes(os.urandom(2 * 2**20))
    (tree / "run" / "notes.md").write_text("epoch 1\n")
    first = through.rsync("-a", "--stats", f"{tree}/", "alice@login:tree/")
    assert first.returncode == 0, first.stderr
    assert "Number of regular files transferred: 2" in first.stdout
    second = through.rsync("-a", "--stats", f"{tree}/", "alice@login:tree/")
    assert "Number of regular files transferred: 0" in second.stdout, second.stdout + second.stderr
    fetched = tmp_path / "fetched"
    assert through.rsync("-a", "alice@login:tree/", f"{fetched}/").returncode == 0
    assert (fetched / "run" / "weights.bin").read_bytes() == (tree / "run" / "weights.bin").read_bytes()

    # forwarding as the site's defaults say (kube.ssh_tcp_forwarding local, ssh_agent_forwarding on):
    # `-W` through her pod reaches what the pod reaches (here its own sshd), and her agent, forwarded
    # end to end with `-A`, lists her key in the pod
    stdio = subprocess.run(
        ["ssh", "-F", str(through.config), "-J", through.jump, "-W", "127.0.0.1:2222", "alice@login"],
        input="", capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert stdio.stdout.startswith("SSH-2.0-OpenSSH"), stdio.stderr
    with agent_holding(alice.key, tmp_path / "agent.sock") as agent:
        fingerprint = subprocess.run(
            ["ssh-keygen", "-lf", f"{alice.key}.pub"], capture_output=True, text=True, check=True
        ).stdout.split()[1]
        forwarded = through.ssh("alice", "ssh-add -l", options=("-A", "-o", f"IdentityAgent={agent}"))
    assert forwarded.returncode == 0, forwarded.stderr
    assert fingerprint in forwarded.stdout

    # bob's key does not get him into alice's pod, nor through the gateway as alice
    refused = Through(tmp_path, bob, gateway.port).ssh("alice", "id")
    assert refused.returncode == SSH_FAILED and "Permission denied" in refused.stderr

    # short sessions 4 s apart, each shorter than a heartbeat (3 s), with SUP's passes in between:
    # each tunnel's open and close count as use, so her pod is never put to sleep between them
    # (before, a pod whose sessions fell between heartbeats slept, and the next session paid a wake)
    site.reconcile("kube")  # a full pass sees her pod first: from then on it may sleep, and is asked
    for _ in range(6):
        quick = through.ssh("alice", "true")
        assert quick.returncode == 0, quick.stderr
        for _ in range(4):
            time.sleep(1)
            site.reconcile("kube")
            assert replicas(site, "login-alice") == 1, "put to sleep between short sessions"

    # something of hers still runs after she left (a nohup job): the idle reporter in her pod says
    # so to the gateway, and SUP's passes leave the pod up
    left = through.ssh("alice", "nohup sleep 600 >/dev/null 2>&1 & echo left")
    assert left.stdout == "left\n", left.stderr
    wait_for_busy(gateway, "alice", True)
    for _ in range(3):
        site.reconcile("kube")
        time.sleep(1)
    assert replicas(site, "login-alice") == 1

    # once it ends (nothing of hers runs, nobody connected for idle_seconds), SUP's pass scales the
    # pod to zero; the home stays
    ended = through.ssh("alice", "pkill -u alice -x sleep; echo ended")
    assert ended.stdout == "ended\n", ended.stderr
    wait_for_busy(gateway, "alice", False)
    deadline = time.monotonic() + 60
    while replicas(site, "login-alice") != 0:  # a readiness probe's sshd child can read busy once
        assert time.monotonic() < deadline, "alice's idle pod was never put to sleep"
        site.reconcile("kube")
        time.sleep(1)
    statefulset = f"/apis/apps/v1/namespaces/{site.namespace}/statefulsets/login-alice"
    site.cluster.wait_for(lambda: site.gone("pods/login-alice-0"), "alice's pod gone", timeout=120)

    # the next connection wakes it and lands, same home, same host key (known_hosts unchanged)
    started = time.monotonic()
    woken = through.ssh("alice", "id -un; ls ~/kept ~/notes.txt")
    print(f"wake through the gateway to a shell: {time.monotonic() - started:.1f} s")
    assert woken.returncode == 0, woken.stderr
    assert woken.stdout.split() == ["alice", "/home/alice/kept", "/home/alice/notes.txt"]
    assert site.cluster.api.get(statefulset)["spec"]["replicas"] == 1  # type: ignore[index]


def test_group_pod_many_sessions_kept_up_while_a_member_is_in_and_a_suspended_person_refused(
    make_gateway_site: Callable[..., GatewaySite], tmp_path: Path
) -> None:
    site, gateway = make_gateway_site(
        pod_security="baseline",
        group_pods=["physics"],
        gateway={"route_cache_seconds": 0.5, "route_recheck_seconds": 1},
    )
    alice, bob, carol = (new_person(site.directory, n) for n in ("alice", "bob", "carol"))
    site.post("groups", {"name": "physics"})
    site.add(alice, "physics")
    site.add(bob, "physics")
    site.add(carol)
    for login in ("group-physics", "login-alice", "login-bob", "login-carol"):
        site.wait_ready(login)
    site.wait_ssh(alice, "group-physics")
    site.wait_ssh(alice, "login-alice")
    site.wait_ssh(bob, "login-bob")
    through = {p.name: Through(tmp_path, p, gateway.port) for p in (alice, bob, carol)}

    # each member lands in the group's pod as themselves; carol, not a member, gets no tunnel to it
    for name in ("alice", "bob"):
        landed = through[name].ssh(name, "id -un; hostname", pod="physics")
        assert landed.returncode == 0, landed.stderr
        assert landed.stdout.split() == [name, "group-physics-0"]
    outside = through["carol"].ssh("carol", "id", pod="physics")
    assert outside.returncode == SSH_FAILED
    assert (
        "stdio forwarding failed" in outside.stderr
    )  # the reason shows above LogLevel ERROR (tests/gateway)

    # many sessions at once, through one gateway, to own pods and the group's pod
    runs = [("alice", "login"), ("bob", "login"), ("alice", "physics"), ("bob", "physics")] * 6
    with ThreadPoolExecutor(len(runs)) as pool:
        results = list(
            pool.map(lambda run: through[run[0]].ssh(run[0], "echo $(id -un)@$(hostname)", pod=run[1]), runs)
        )
    failed = [(run, r.stderr[-200:]) for run, r in zip(runs, results, strict=True) if r.returncode != 0]
    assert failed == []
    expected = {
        ("alice", "login"): "alice@login-alice-0",
        ("bob", "login"): "bob@login-bob-0",
        ("alice", "physics"): "alice@group-physics-0",
        ("bob", "physics"): "bob@group-physics-0",
    }
    assert [r.stdout.strip() for r in results] == [expected[run] for run in runs]

    # alice holds a shell in the group's pod and is suspended: the gateway cuts it (its recheck, 1 s
    # here, then the route cache), and OpenSSH prints why
    hop = through["alice"]
    talkative = tmp_path / "ssh_config-alice-info"  # the jump's "Received disconnect" is INFO
    talkative.write_text(hop.config.read_text().replace("LogLevel ERROR", "LogLevel INFO"))
    cut = subprocess.Popen(
        ["ssh", "-F", str(talkative), "-J", hop.jump, "alice@physics", "echo ready; cat >/dev/null"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert cut.stdout is not None
        assert cut.stdout.readline() == b"ready\n"  # her shell is there (a sessions list may be stale)
        suspended = time.monotonic()
        site.patch("users/alice", {"active": False})
        cut.wait(timeout=60)  # not communicate(): closing her stdin would end the session itself
        assert cut.stderr is not None
        stderr = cut.stderr.read()
        seconds = time.monotonic() - suspended
    finally:
        cut.kill()
    assert cut.returncode == SSH_FAILED and b"access to the login pod" in stderr, stderr
    assert seconds < 30, seconds  # the stated bound with these settings is 1.5 s plus a lookup

    # bob holds a session in the group's pod: SUP's passes put the idle pods to sleep, not that one
    held = through["bob"].hold("bob", pod="physics")
    try:
        site.cluster.wait_for(
            lambda: [s["name"] for s in site.call("GET", "gateway/sessions").json()] == ["physics"],
            "bob's session in SUP's sessions list",
            60,
        )
        site.reconcile("kube")
        time.sleep(1.5)
        site.reconcile("kube")
        assert replicas(site, "group-physics") == 1
        assert [replicas(site, f"login-{n}") for n in ("bob", "carol")] == [0, 0]
        assert replicas(site, "login-alice") in (0, None)  # suspended: her pod goes
    finally:
        held.kill()
        held.wait()
    site.cluster.wait_for(
        lambda: site.call("GET", "gateway/sessions").json() == [], "the session to leave SUP's list", 60
    )
    deadline = time.monotonic() + 60
    while replicas(site, "group-physics") != 0:  # the pod's reporter is asked once nobody holds it
        assert time.monotonic() < deadline, f"the group's pod never slept: {gateway.heartbeats()[-2:]}"
        site.reconcile("kube")
        time.sleep(1)

    # suspended: refused at the gateway as a wrong key would be, and nothing is woken for her
    refused = through["alice"].ssh("alice", "id")
    assert refused.returncode == SSH_FAILED and "Permission denied" in refused.stderr
    assert replicas(site, "login-alice") in (0, None)


OLD_SERVICE = Path(__file__).parents[1] / "kube" / "fixtures" / "service-with-cluster-ip.yaml.j2"


def test_an_upgrade_replaces_a_login_service_with_a_cluster_ip_and_a_held_session_lasts_or_reconnects(
    make_gateway_site: Callable[..., GatewaySite], tmp_path: Path
) -> None:
    """A site upgraded from login Services with a ClusterIP: SUP's pass deletes and creates each
    again headless (clusterIP cannot change in place). A session held through the old ClusterIP is
    kept by the node's connection tracking or cut; either way, the next connection through the
    upgraded gateway lands, at the pod's own address, on the first try."""
    before = tmp_path / "templates-before"
    before.mkdir()
    (before / "service.yaml.j2").write_text(OLD_SERVICE.read_text())
    site, _ = make_gateway_site(idle_seconds=3600, templates_dir=str(before))  # SUP before the upgrade
    alice = new_person(site.directory, "alice")
    site.add(alice)
    site.wait_ready("login-alice")
    name = f"login-alice.{site.namespace}.svc"
    path = f"/api/v1/namespaces/{site.namespace}/services/login-alice"
    old = site.cluster.api.get(path)
    assert old is not None and old["spec"]["clusterIP"] not in (None, "None")
    assert site.cluster.resolve(name) == [old["spec"]["clusterIP"]]
    assert site.server is not None
    token = site.stack.token("gateway")["Authorization"].removeprefix("Bearer ")

    def at_the_service_port(pod: PodRoute) -> tuple[str, int]:  # the gateway before: route port 22
        return f"{pod.service}.{pod.namespace}.svc", 22

    def start_gateway(key: str, address: Callable[[PodRoute], tuple[str, int]] | None) -> RunningGateway:
        assert site.server is not None
        key_file = write_host_key(tmp_path / key)
        running = RunningGateway(
            site.server.url, key_file, token=token, address=address, resolve=site.cluster.resolve
        )
        gateways.append(running)
        return running

    gateways: list[RunningGateway] = []
    start_gateway("gateway-before", at_the_service_port)
    hop = Through(tmp_path, alice, gateways[0].port)
    held = subprocess.Popen(
        ["ssh", "-F", str(hop.config), "-J", hop.jump, "alice@login",
         'echo ready; while read -r line; do echo "got $line"; done'],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert held.stdout is not None and held.stdin is not None
        assert held.stdout.readline() == b"ready\n"  # held through ClusterIP:22

        del site.stack.config["kube"]["templates_dir"]  # the upgrade: the shipped templates
        site.restart()
        site.reconcile("kube")  # after the pass the restarted SUP runs at once
        new = site.cluster.api.get(path)
        assert new is not None and new["metadata"]["uid"] != old["metadata"]["uid"]  # replaced
        assert new["spec"]["clusterIP"] == "None"
        pod_ip = site.cluster.api.get(f"/api/v1/namespaces/{site.namespace}/pods/login-alice-0")
        assert pod_ip is not None
        site.cluster.wait_for(
            lambda: site.cluster.resolve(name) == [pod_ip["status"]["podIP"]], f"{name} to be the pod's"
        )

        held.stdin.write(b"still there\n")
        held.stdin.flush()
        answer = _line_within(held, 20)
        outcome = {b"got still there\n": "kept", b"": "cut"}.get(answer or b"-", "no answer in 20 s")
        print(f"a session held through the old ClusterIP after SUP replaced its Service: {outcome}")

        after = start_gateway("gateway-after", None)  # its own address: the name, at the route's port 2222
        landed = Through(tmp_path, alice, after.port).ssh("alice", "id -un; hostname")
        assert landed.returncode == 0, landed.stderr
        assert landed.stdout.split() == ["alice", "login-alice-0"]
    finally:
        held.kill()
        held.wait()
        for gateway in gateways:
            gateway.stop()


def _line_within(process: subprocess.Popen[bytes], seconds: float) -> bytes | None:
    """The next line of the process's output, or None if none comes within `seconds`."""
    assert process.stdout is not None
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(process.stdout.readline)
        try:
            return future.result(timeout=seconds)
        except TimeoutError:
            process.kill()  # ends the readline, so that the pool can shut down
            return None


@contextlib.contextmanager
def agent_holding(key: Path, socket: Path) -> Iterator[Path]:
    """An ssh-agent of the person's on `socket`, holding their key, for the block."""
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(socket)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not socket.exists():
            assert time.monotonic() < deadline and agent.poll() is None, "ssh-agent did not start"
            time.sleep(0.05)
        env = {**os.environ, "SSH_AUTH_SOCK": str(socket)}
        subprocess.run(["ssh-add", str(key)], env=env, capture_output=True, check=True)
        yield socket
    finally:
        agent.terminate()
        agent.wait()


def wait_for_busy(gateway: RunningGateway, name: str, busy: bool, timeout: float = 60) -> None:
    """Until SUP has accepted a heartbeat in which the reporter of `name`'s pod said `busy`."""
    deadline = time.monotonic() + timeout
    wanted = {"kind": "user", "name": name, "busy": busy}
    while not any(wanted in beat["busy"] for beat in gateway.heartbeats()[-2:]):
        assert time.monotonic() < deadline, f"no heartbeat with {wanted}: {gateway.heartbeats()[-2:]}"
        time.sleep(0.3)


def replicas(site: LoginSite, login: str) -> int | None:
    """The login StatefulSet's replicas on the API server (None: it is gone)."""
    found = site.cluster.api.get(f"/apis/apps/v1/namespaces/{site.namespace}/statefulsets/{login}")
    return None if found is None else int(found["spec"]["replicas"])
