"""The login image, run as a login pod would run it (tests/images/login.py): what a person sees when
they `ssh` in, which keys sshd takes, what survives a restart, and the munge sidecar."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sup.config import Settings
from sup.domain import sshcerts
from sup.domain.desired import StoredGroup, StoredUser, StoreSnapshot, derive
from sup.reconcile.planner import policy_of
from sup.ssh_ca.service import SshCa
from sup.targets.kube.login_files import Directory
from tests.images.login import GROUP_POD_CAPABILITIES, LoginPod, Person, make_key
from tests.support.chroot import Identity, make_emptydir, run, start
from tests.support.processes import stop_process

pytestmark = pytest.mark.timeout(1800)  # the first test may build the images

ALICE = Person("alice", 10001, 10001)
BOB = Person("bob", 10002, 10002)
CAROL = Person("carol", 10003, 10003)
LAB = ("lab", 20001)
MUNGE_UID = 994


@pytest.fixture
def pod(login_root: Path, tmp_path: Path) -> Iterator[LoginPod]:
    tmp_path.chmod(0o755)
    login = LoginPod(login_root, tmp_path)
    yield login
    login.stop()


@pytest.fixture
def alice_home(tmp_path: Path) -> Path:
    """Alice's home volume: as the kubelet leaves it with fsGroup (group-writable, setgid)."""
    return make_emptydir(tmp_path / "home-alice", owner=ALICE.uid, mode=0o2775)


def test_a_user_logs_in_as_themselves_with_their_groups_and_a_writable_home(
    pod: LoginPod, alice_home: Path, tmp_path: Path
) -> None:
    key = make_key(tmp_path, "alice")
    pod.write_maps([ALICE], {LAB[0]: (LAB[1], [ALICE])})
    pod.authorize(ALICE, key)
    pod.start_user(ALICE, alice_home, groups=(LAB[1],))  # supplementalGroups: the lab's gid

    result = pod.ssh(ALICE, key, "id; echo HOME=$HOME; touch ~/x && ls -ln ~/x && ls -l ~/x; id -Gn alice")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "uid=10001(alice) gid=10001(alice) groups=10001(alice),20001(lab)"
    assert lines[1] == "HOME=/home/alice"
    assert lines[2].split()[2:4] == ["10001", "10001"] and lines[3].split()[2:4] == ["alice", "alice"]
    assert lines[4] == "alice lab"  # NSS: the group map, not only the process's groups
    assert (alice_home / "x").stat().st_uid == ALICE.uid  # on the volume


def test_another_key_is_refused_and_a_changed_keys_file_holds_at_the_next_login(
    pod: LoginPod, alice_home: Path, tmp_path: Path
) -> None:
    first, second = make_key(tmp_path, "first"), make_key(tmp_path, "second")
    pod.write_maps([ALICE], {})
    pod.authorize(ALICE, first)
    pod.start_user(ALICE, alice_home)
    sshd = pod.process
    assert pod.ssh(ALICE, first, "true").returncode == 0

    refused = pod.ssh(ALICE, second, "true")
    assert refused.returncode == 255 and "Permission denied (publickey)" in refused.stderr

    pod.authorize(ALICE, second)  # the ConfigMap changes; sshd is not restarted
    assert pod.ssh(ALICE, second, "true").returncode == 0
    assert pod.ssh(ALICE, first, "true").returncode == 255
    assert pod.process is sshd and sshd is not None and sshd.poll() is None


def test_only_the_pods_user_may_log_in(pod: LoginPod, alice_home: Path, tmp_path: Path) -> None:
    """Bob is in the maps with a key (as in a group's pod), but this pod's sshd runs as Alice."""
    key = make_key(tmp_path, "bob")
    pod.write_maps([ALICE, BOB], {})
    pod.authorize(BOB, key)
    pod.start_user(ALICE, alice_home)
    assert pod.ssh(BOB, key, "true").returncode == 255


def test_the_host_key_is_made_once_and_kept_private_across_restarts(
    pod: LoginPod, alice_home: Path, tmp_path: Path
) -> None:
    key = make_key(tmp_path, "alice")
    pod.write_maps([ALICE], {})
    pod.authorize(ALICE, key)
    pod.start_user(ALICE, alice_home)
    assert pod.ssh(ALICE, key, "true").returncode == 0  # records the host key in known_hosts
    host_key = alice_home / ".ssh" / "sup_login_host_ed25519_key"
    public = Path(f"{host_key}.pub").read_text()
    pod.stop()

    host_key.chmod(0o660)  # what a recursive fsGroup change does to it
    pod.start_user(ALICE, alice_home)
    assert pod.ssh(ALICE, key, "true", strict="yes").returncode == 0  # the same host key
    assert Path(f"{host_key}.pub").read_text() == public
    assert host_key.stat().st_mode & 0o777 == 0o600 and host_key.stat().st_uid == ALICE.uid


def test_scp_round_trip(pod: LoginPod, alice_home: Path, tmp_path: Path) -> None:
    key = make_key(tmp_path, "alice")
    pod.write_maps([ALICE], {})
    pod.authorize(ALICE, key)
    pod.start_user(ALICE, alice_home)
    sent = tmp_path / "sent"
    sent.write_bytes(os.urandom(100_000))
    for legacy in (False, True):  # SFTP (scp's default) and the old scp protocol
        back = tmp_path / f"back-{legacy}"
        assert pod.scp(key, str(sent), "alice@127.0.0.1:data", legacy=legacy).returncode == 0
        assert (alice_home / "data").read_bytes() == sent.read_bytes()
        result = pod.scp(key, "alice@127.0.0.1:data", str(back), legacy=legacy)
        assert result.returncode == 0, result.stderr
        assert back.read_bytes() == sent.read_bytes()


def test_rsync_round_trip_and_forwarding_as_set(pod: LoginPod, alice_home: Path, tmp_path: Path) -> None:
    """rsync is in the image (the far end of `rsync -e ssh`); SUP_SSH_ALLOW_TCP_FORWARDING=no
    reaches sshd: `ssh -W` through the pod is refused."""
    key = make_key(tmp_path, "alice")
    pod.write_maps([ALICE], {})
    pod.authorize(ALICE, key)
    pod.start_user(ALICE, alice_home, env={"SUP_SSH_ALLOW_TCP_FORWARDING": "no"})
    sent = tmp_path / "sent"
    sent.mkdir()
    (sent / "data").write_bytes(os.urandom(100_000))
    shell = " ".join(["ssh", *pod.options(key, "accept-new"), "-p", str(pod.port)])

    up = subprocess.run(
        ["rsync", "-a", "-e", shell, f"{sent}/", "alice@127.0.0.1:copy/"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    assert (alice_home / "copy" / "data").read_bytes() == (sent / "data").read_bytes()
    # `-W` to the pod's own sshd, which listens there: allowed, its banner would come back
    target = f"127.0.0.1:{pod.port}"
    stdio = subprocess.run(
        ["ssh", *pod.options(key, "accept-new"), "-p", str(pod.port), "-W", target, "alice@127.0.0.1"],
        input="", capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert stdio.returncode == 255 and "stdio forwarding failed" in stdio.stderr
    assert "SSH-2.0" not in stdio.stdout


def test_group_pod_lets_each_member_in_as_themselves_and_nobody_else(pod: LoginPod, tmp_path: Path) -> None:
    keys = {person.name: make_key(tmp_path, person.name) for person in (ALICE, BOB, CAROL)}
    pod.write_maps([ALICE, BOB, CAROL], {LAB[0]: (LAB[1], [ALICE, BOB])})
    for person in (ALICE, BOB, CAROL):
        pod.authorize(person, keys[person.name])
    homes = make_emptydir(tmp_path / "homes")  # scratch: an emptyDir; the entrypoint makes the homes
    pod.start_group(*LAB, homes)  # as root, with only SETUID, SETGID, SYS_CHROOT, AUDIT_WRITE

    for person in (ALICE, BOB):
        result = pod.ssh(person, keys[person.name], "id; touch ~/mine && echo ok")
        assert result.returncode == 0, result.stderr
        uid = f"uid={person.uid}({person.name}) gid={person.gid}({person.name})"
        assert result.stdout.splitlines() == [f"{uid} groups={person.gid}({person.name}),20001(lab)", "ok"]
        assert (homes / person.name / "mine").stat().st_uid == person.uid
        assert (homes / person.name).stat().st_mode & 0o777 == 0o700
    assert pod.ssh(CAROL, keys["carol"], "true").returncode == 255  # not in the group
    assert pod.ssh(ALICE, keys["bob"], "true").returncode == 255  # bob's key is not alice's


DAVE = Person("dave", 10004, 10004)


def _wait_for(check: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.2)


def test_group_pod_members_cannot_plant_in_each_others_homes_or_take_a_newcomers(
    pod: LoginPod, tmp_path: Path
) -> None:
    """A member of a group pod tries what would run their code as another member (issue: a
    world-writable /home let alice move bob's home away and plant a .bashrc, and make a newcomer's
    home before them): /home is root's, every home is its member's own 0700 before they can log in,
    and bob's and dave's logins run nothing alice wrote. A member removed from the pod's passwd is
    refused and what they ran there ends."""
    keys = {person.name: make_key(tmp_path, person.name) for person in (ALICE, BOB, DAVE)}
    pod.write_maps([ALICE, BOB], {LAB[0]: (LAB[1], [ALICE, BOB])})
    for person in (ALICE, BOB, DAVE):
        pod.authorize(person, keys[person.name])
    homes = make_emptydir(tmp_path / "homes")  # an emptyDir: root's, 0777
    pod.start_group(*LAB, homes)

    attempt = (
        "mv /home/bob /home/.x; mkdir -m 755 /home/bob2; mkdir -p /home/dave/.ssh;"
        " echo 'touch /tmp/ran-as-$USER' > /home/bob/.bashrc; stat -c '%U %a' /home /home/alice /home/bob"
    )
    result = pod.ssh(ALICE, keys["alice"], attempt)
    assert result.stdout.splitlines() == ["root 755", "alice 700", "bob 700"], result.stderr
    assert result.stderr.count("Permission denied") == 4, result.stderr
    assert sorted(p.name for p in homes.iterdir()) == ["alice", "bob"]

    # bob writes his own ~/.ssh/rc: sshd runs no rc file (PermitUserRC no)
    bob_rc = "mkdir -p ~/.ssh && echo 'touch ~/rc-ran' > ~/.ssh/rc && ls -A ~"
    assert pod.ssh(BOB, keys["bob"], bob_rc).stdout.split() == [".ssh"]
    assert pod.ssh(BOB, keys["bob"], "ls -A ~").stdout.split() == [".ssh"]

    # dave joins while the pod runs: alice cannot make his home first; he gets his own, then logs in
    pod.write_maps([ALICE, BOB, DAVE], {LAB[0]: (LAB[1], [ALICE, BOB, DAVE])})
    early = pod.ssh(ALICE, keys["alice"], "mkdir /home/dave && echo made")
    assert "made" not in early.stdout
    _wait_for(lambda: (homes / "dave").is_dir(), "dave's home to be made")
    assert ((homes / "dave").stat().st_uid, (homes / "dave").stat().st_mode & 0o7777) == (DAVE.uid, 0o700)
    _wait_for(lambda: pod.ssh(DAVE, keys["dave"], "true").returncode == 0, "dave to log in")
    assert pod.ssh(DAVE, keys["dave"], "ls -A ~; id -un").stdout.split() == ["dave"]
    assert not list((pod.chroot.root / "tmp").glob("ran-as-*"))

    # bob leaves the group's pod (removed, suspended): his background process ends, he is refused
    held = pod.ssh(BOB, keys["bob"], "setsid nohup sleep 300 >/dev/null 2>&1 < /dev/null & echo $!")
    pid = int(held.stdout.strip())
    assert Path(f"/proc/{pid}").exists()
    pod.write_maps([ALICE, DAVE], {LAB[0]: (LAB[1], [ALICE, DAVE])})
    _wait_for(lambda: not Path(f"/proc/{pid}").exists(), "bob's process to end")
    assert pod.ssh(BOB, keys["bob"], "true").returncode == 255
    assert (homes / "bob").stat().st_uid == BOB.uid  # his files stay


def test_group_pod_makes_deeper_homes_through_roots_directories_and_hands_no_home_on(
    pod: LoginPod, tmp_path: Path
) -> None:
    """A home deeper under /home gets root's directories above it; a home left by another uid (a
    name that came back as another person) is not given to the newcomer, who is not let in."""
    erin = Person("erin", 10005, 10005)
    frank = Person("frank", 10006, 10006)
    erin_line = erin.passwd_line.replace("/home/erin", "/home/lab/erin")
    keys = {person.name: make_key(tmp_path, person.name) for person in (erin, frank)}
    for person in (erin, frank):
        pod.authorize(person, keys[person.name])
    pod.write("passwd", f"{erin_line}\n{frank.passwd_line}\n")
    pod.write("group", "erin:x:10005:\nfrank:x:10006:\nlab:x:20001:erin,frank\n")
    homes = make_emptydir(tmp_path / "homes")
    old = make_emptydir(homes / "frank", owner=10099, mode=0o700)  # the files of an earlier frank
    (old / "notes").write_text("not the new frank's")
    pod.start_group(*LAB, homes)

    lab = homes / "lab"
    assert (lab.stat().st_uid, lab.stat().st_mode & 0o7777) == (0, 0o755)
    assert pod.ssh(erin, keys["erin"], "pwd; stat -c '%U %a' ~").stdout.split() == [
        "/home/lab/erin",
        "erin",
        "700",
    ]
    assert pod.ssh(frank, keys["frank"], "true").returncode == 255
    assert old.stat().st_uid == 10099
    assert "belongs to uid 10099" in pod.log.read_text()


def test_group_pod_keeps_the_host_key_of_the_sites_secret_across_restarts(
    pod: LoginPod, tmp_path: Path
) -> None:
    """kube.group_host_key_secret: the group's key, mounted read-only (0400, root's), is sshd's host
    key at every start, so a client with strict known_hosts gets in after a restart (or a wake);
    without it each start makes a new key, which such a client refuses."""
    key = make_key(tmp_path, "alice")
    pod.write_maps([ALICE], {LAB[0]: (LAB[1], [ALICE])})
    pod.authorize(ALICE, key)
    secret = make_emptydir(tmp_path / "host-key", mode=0o755)
    data = make_emptydir(secret / "..2026_11_27_00_00_00.1", mode=0o755)  # as the kubelet lays it out
    host_key = data / "sup_login_host_ed25519_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True)
    Path(f"{host_key}.pub").unlink()
    host_key.chmod(0o400)
    (secret / "..data").symlink_to(data.name)
    (secret / host_key.name).symlink_to(f"..data/{host_key.name}")
    secrets, env = {"/etc/sup/host-key": secret}, {"SUP_HOST_KEY_DIR": "/etc/sup/host-key"}

    pod.start_group(*LAB, make_emptydir(tmp_path / "homes-1"), secrets=secrets, env=env)
    assert pod.ssh(ALICE, key, "true").returncode == 0  # known_hosts learns the key
    pod.stop()
    pod.start_group(*LAB, make_emptydir(tmp_path / "homes-2"), secrets=secrets, env=env)
    assert pod.ssh(ALICE, key, "true", strict="yes").returncode == 0
    pod.stop()
    pod.start_group(*LAB, make_emptydir(tmp_path / "homes-3"))  # no Secret: a key of its own
    changed = pod.ssh(ALICE, key, "true", strict="yes")
    assert changed.returncode == 255 and "HOST IDENTIFICATION HAS CHANGED" in changed.stderr


def test_slurm_client_and_munge_sidecar(pod: LoginPod, alice_home: Path, tmp_path: Path) -> None:
    """The munge sidecar (same image) serves the socket on a shared emptyDir: the user gets
    credentials for their own uid and sees no key."""
    secret = make_emptydir(tmp_path / "munge-key", mode=0o755)
    (secret / "munge.key").write_bytes(os.urandom(1024))
    os.chown(secret / "munge.key", 0, MUNGE_UID)
    (secret / "munge.key").chmod(0o440)  # a Secret with defaultMode 0400 and fsGroup
    state = make_emptydir(tmp_path / "munge-state")
    socket_dir = make_emptydir(tmp_path / "munge-socket")
    slurm_config = make_emptydir(tmp_path / "slurm", mode=0o755)  # kube.slurm_config_map
    (slurm_config / "slurm.conf").write_text("ClusterName=test\nSlurmctldHost=localhost\n")
    munged = start(
        pod.chroot.command(
            ["/usr/local/sbin/sup-munged"],
            identity=Identity(MUNGE_UID, MUNGE_UID, (MUNGE_UID,)),
            mounts={"/etc/munge-key": secret, "/var/lib/munge": state, "/run/munge": socket_dir},
        ),
        tmp_path / "munged.log",
    )
    try:
        key = make_key(tmp_path, "alice")
        pod.write_maps([ALICE], {})
        pod.authorize(ALICE, key)
        pod.start_user(ALICE, alice_home, mounts={"/run/munge": socket_dir, "/etc/slurm": slurm_config})
        deadline = time.monotonic() + 15
        while not (socket_dir / "munge.socket.2").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        result = pod.ssh(ALICE, key, "srun --version; munge -n | unmunge; ls /etc/munge-key /etc/munge")
        assert result.stdout.startswith("slurm-wlm 22.05."), result.stderr
        fields = [line.split() for line in result.stdout.splitlines()]
        assert ["STATUS:", "Success", "(0)"] in fields, (tmp_path / "munged.log").read_text()
        assert ["UID:", "alice", "(10001)"] in fields  # a credential for their own uid
        assert "munge.key" not in result.stdout  # the key is in the sidecar only
    finally:
        stop_process(munged)


def test_group_pod_munge_guard_gives_members_their_credential_and_root_none(
    pod: LoginPod, tmp_path: Path
) -> None:
    """In a group's pod sshd runs as root: code running as root there must not get a uid-0 munge
    credential (root in Slurm). The guard (root, SETUID and SETGID only) serves the login
    container's socket and reaches munged (on a volume of its own) as each caller."""
    state = make_emptydir(tmp_path / "munge-state")
    (state / "munge.key").write_bytes(os.urandom(1024))
    os.chown(state / "munge.key", MUNGE_UID, MUNGE_UID)
    (state / "munge.key").chmod(0o400)  # as the munge-key init container leaves it
    munged_dir, guard_dir = (
        make_emptydir(tmp_path / "munged-socket"),
        make_emptydir(tmp_path / "munge-socket"),
    )
    munge_env = {
        "SUP_MUNGE_KEY": "/var/lib/munge/munge.key",
        "SUP_MUNGE_SOCKET": "/run/munged/munge.socket.2",
    }
    guard_env = {"SUP_MUNGE_DENY_UIDS": str(MUNGE_UID)}
    daemons = [
        start(
            pod.chroot.command(
                ["/usr/local/sbin/sup-munged"],
                identity=Identity(MUNGE_UID, MUNGE_UID, (MUNGE_UID,)),
                env=munge_env,
                mounts={"/var/lib/munge": state, "/run/munged": munged_dir},
            ),
            tmp_path / "munged.log",
        ),
        start(
            pod.chroot.command(
                ["/usr/local/sbin/sup-munge-guard"],
                env=guard_env,
                capabilities=("SETUID", "SETGID", "SYS_CHROOT"),  # the template's two; this harness's chroot
                mounts={"/run/munge": guard_dir, "/run/munged": munged_dir},
            ),
            tmp_path / "guard.log",
        ),
    ]
    try:
        key = make_key(tmp_path, "alice")
        pod.write_maps([ALICE], {LAB[0]: (LAB[1], [ALICE])})
        pod.authorize(ALICE, key)
        pod.start_group(*LAB, make_emptydir(tmp_path / "homes"), mounts={"/run/munge": guard_dir})
        _wait_for(lambda: (guard_dir / "munge.socket.2").exists(), "the guard's socket")
        _wait_for(lambda: (munged_dir / "munge.socket.2").exists(), "munged's socket")
        result = pod.ssh(ALICE, key, "munge -n | unmunge")
        fields = [line.split() for line in result.stdout.splitlines()]
        assert ["UID:", "alice", "(10001)"] in fields, (result.stderr, (tmp_path / "guard.log").read_text())
        # root in that container (sshd's capabilities), as code sshd ran would be
        as_root = run(
            pod.chroot.command(
                ["munge", "-n"], capabilities=GROUP_POD_CAPABILITIES, mounts={"/run/munge": guard_dir}
            )
        )
        assert as_root.returncode != 0 and "MUNGE:" not in as_root.stdout, as_root
        assert "refused uid 0" in (tmp_path / "guard.log").read_text()
        # without the guard (munged's own socket, as before), root did get one
        direct = run(
            pod.chroot.command(
                ["munge", "-n", "-S", "/run/munged/munge.socket.2"],
                capabilities=GROUP_POD_CAPABILITIES,
                mounts={"/run/munged": munged_dir},
            )
        )
        assert direct.stdout.startswith("MUNGE:"), direct
    finally:
        for daemon in daemons:
            stop_process(daemon)


def test_missing_settings_stop_the_entrypoint_with_a_message(login_root: Path, tmp_path: Path) -> None:
    empty = make_emptydir(tmp_path / "empty", mode=0o755)
    pod = LoginPod(login_root, tmp_path)
    user_env = {"SUP_USER": "alice", "SUP_UID": "10001", "SUP_GID": "10001", "SUP_HOME": "/home/alice",
                "SUP_SSH_PORT": "2222"}  # fmt: skip
    alice = Identity(ALICE.uid, ALICE.gid)
    cases = [
        ({}, alice, {}, "neither SUP_USER"),
        (user_env, alice, {"/etc/sup": empty}, "/etc/sup/login is missing"),
        ({**user_env, "SUP_SSH_PORT": ""}, alice, {}, "SUP_SSH_PORT must be a port number"),
        ({**user_env, "SUP_IDLE_PORT": "9101;x"}, alice, {}, "SUP_IDLE_PORT must be a port number"),
        ({**user_env, "SUP_UID": "10002"}, alice, {}, "runs as uid 10001, but SUP_UID is 10002"),
        ({"SUP_GROUP": "lab", "SUP_GID": "20001", "SUP_SSH_PORT": "2222"}, alice, {}, "runs sshd as root"),
        (
            {**user_env, "SUP_SSH_ALLOW_TCP_FORWARDING": "all"},
            alice,
            {},
            "SUP_SSH_ALLOW_TCP_FORWARDING must be yes, local, remote or no, not 'all'",
        ),
    ]
    pod.write_maps([ALICE], {})
    for env, identity, mounts, message in cases:
        command = pod.chroot.command(["/usr/local/sbin/sup-login"], identity=identity, env=env, mounts=mounts)
        result = run(command)
        assert result.returncode == 64 and message in result.stderr, (env, result.stderr)
    munged = run(pod.chroot.command(["/usr/local/sbin/sup-munged"], identity=Identity(MUNGE_UID, MUNGE_UID)))
    assert munged.returncode == 64 and "/etc/munge-key/munge.key is missing" in munged.stderr


def _certify(ca: Path, key: Path, principal: str, now: datetime | None = None) -> None:
    """A certificate of SUP's CA for `key` (sup/domain/sshcerts.py signs as /api/v1/me/ssh-certificate
    does), where ssh finds it: KEY-cert.pub."""
    made = sshcerts.sign_user_certificate(
        sshcerts.load_ca_key(ca.read_bytes()), Path(f"{key}.pub").read_text().strip(), principal=principal,
        serial=1, key_id=f"sup:{principal}:1", now=now or datetime.now(UTC),
        lifetime=timedelta(hours=1), extensions=["permit-pty"],
    )  # fmt: skip
    Path(f"{key}-cert.pub").write_text(made.line + "\n")


def test_a_user_pod_takes_a_certificate_of_the_ca_in_its_configmap(
    pod: LoginPod, alice_home: Path, tmp_path: Path
) -> None:
    """No key of alice's in the pod: a certificate of the CA SUP writes into the ConfigMap lets her
    in; one for another principal, an expired one and one of another CA do not; without the CA file
    (certificates turned off, read at each login) hers stops working."""
    ca, other_ca = make_key(tmp_path, "ca"), make_key(tmp_path, "other-ca")
    key = make_key(tmp_path, "alice")
    pod.write_maps([ALICE], {})
    pod.write("sup-ssh-ca.pub", Path(f"{ca}.pub").read_text())
    pod.start_user(ALICE, alice_home)

    _certify(ca, key, "alice")
    result = pod.ssh(ALICE, key, "id -un")
    assert result.returncode == 0 and result.stdout == "alice\n", result.stderr
    for principal, signer, now in (
        ("bob", ca, datetime.now(UTC)),
        ("alice", ca, datetime.now(UTC) - timedelta(hours=3)),
        ("alice", other_ca, datetime.now(UTC)),
    ):
        _certify(signer, key, principal, now=now)
        assert pod.ssh(ALICE, key, "true").returncode == 255, (principal, signer, now)
    _certify(ca, key, "alice")
    (pod.config / "sup-ssh-ca.pub").unlink()
    assert pod.ssh(ALICE, key, "true").returncode == 255


def test_a_group_pod_takes_each_members_certificate_for_them_only(pod: LoginPod, tmp_path: Path) -> None:
    """Members log in with certificates as themselves (their principals file is published with their
    home, like keys), never as another member; someone outside the group is refused; a member who
    leaves the pod's passwd is refused at once."""
    ca = make_key(tmp_path, "ca")
    keys = {person.name: make_key(tmp_path, person.name) for person in (ALICE, BOB, CAROL)}
    for person in (ALICE, BOB, CAROL):
        _certify(ca, keys[person.name], person.name)
    pod.write_maps([ALICE, BOB, CAROL], {LAB[0]: (LAB[1], [ALICE, BOB])})
    pod.write("sup-ssh-ca.pub", Path(f"{ca}.pub").read_text())
    homes = make_emptydir(tmp_path / "homes")
    pod.start_group(*LAB, homes)

    def lets_in(person: Person) -> Callable[[], bool]:
        return lambda: pod.ssh(person, keys[person.name], "true").returncode == 0

    for person in (ALICE, BOB):
        _wait_for(lets_in(person), f"{person.name} let in")  # once their home is theirs
        result = pod.ssh(person, keys[person.name], "id -un; touch ~/mine && echo ok")
        assert result.stdout.splitlines() == [person.name, "ok"], result.stderr
    assert pod.ssh(CAROL, keys["carol"], "true").returncode == 255  # not in the group
    assert pod.ssh(BOB, keys["alice"], "true").returncode == 255  # alice's certificate names alice only

    pod.write_maps([ALICE], {LAB[0]: (LAB[1], [ALICE])})  # bob removed from the group (SUP's next pass)
    _wait_for(lambda: pod.ssh(BOB, keys["bob"], "true").returncode == 255, "bob refused")
    assert pod.ssh(ALICE, keys["alice"], "true").returncode == 0


def _stored(person: Person, key: Path, groups: dict[str, tuple[int, list[Person]]]) -> StoredUser:
    """`person` as the store holds them, with `key` uploaded and the `groups` they are in."""
    return StoredUser(
        username=person.name, uid_number=person.uid, primary_gid=person.gid,
        display_name=person.name.title(), given_name=None, family_name=None, email=None,
        login_shell="/bin/bash", home_directory=person.home,
        ssh_public_keys=(Path(f"{key}.pub").read_text().strip(),), active=True,
        groups=frozenset(name for name, (_, members) in groups.items() if person in members),
    )  # fmt: skip


def _rendered(
    ca: Path,
    keys: dict[Person, Path],
    groups: dict[str, tuple[int, list[Person]]],
    *,
    plain_keys: bool,
) -> dict[str, str]:
    """A login pod's ConfigMap as SUP renders it: the state derived from a store where each person
    holds their key, with `ssh_ca.plain_keys` as given, the CA keys as the SSH CA's step adds them
    (sup/ssh_ca/step.py), and the files of sup/targets/kube/login_files.py for a pod of everyone in
    `keys` (a user's pod: one person)."""
    settings = Settings(ssh_ca={"key_file": str(ca), "plain_keys": plain_keys})
    assert settings.ssh_ca is not None
    users = tuple(_stored(person, key, groups) for person, key in keys.items())
    stored = [StoredGroup(p.name, p.gid, None, frozenset(), private_for=p.name) for p in keys]
    stored += [
        StoredGroup(name, gid, None, frozenset(m.name for m in members), None)
        for name, (gid, members) in groups.items()
    ]
    desired = derive(StoreSnapshot(users, tuple(stored), ()), policy_of(settings))
    desired = replace(desired, ssh_user_ca_keys=tuple(SshCa(settings.ssh_ca).trusted))
    return Directory(desired).files(desired.users[person.name] for person in keys).data


def _logs_in(pod: LoginPod, person: Person, key: Path) -> Callable[[], bool]:
    return lambda: pod.ssh(person, key, "true").returncode == 0


def test_with_certificates_only_a_user_pod_refuses_her_uploaded_key_and_takes_her_certificate(
    pod: LoginPod, alice_home: Path, tmp_path: Path
) -> None:
    """SUP renders alice's pod with ssh_ca.plain_keys false: her uploaded key (in the store) is not
    in it, so the image's sshd refuses it, and a certificate of SUP's CA lets her in. Switching the
    setting reaches the running pod with its files, either way, without a restart."""
    ca, key = make_key(tmp_path, "ca"), make_key(tmp_path, "alice")
    keys = {ALICE: key}
    pod.write_all(_rendered(ca, keys, {}, plain_keys=False))
    assert not [path.name for path in pod.config.iterdir() if path.name.endswith(".keys")]
    pod.start_user(ALICE, alice_home)
    assert "nobody can log in" not in pod.log.read_text()  # a certificate can

    refused = pod.ssh(ALICE, key, "true")
    assert refused.returncode == 255 and "Permission denied" in refused.stderr, refused.stderr
    _certify(ca, key, "alice")
    result = pod.ssh(ALICE, key, "id -un")
    assert result.returncode == 0 and result.stdout == "alice\n", result.stderr

    Path(f"{key}-cert.pub").unlink()  # her plain key alone from here
    pod.write_all(_rendered(ca, keys, {}, plain_keys=True))  # the default: the key is taken again
    result = pod.ssh(ALICE, key, "id -un")
    assert result.returncode == 0 and result.stdout == "alice\n", result.stderr
    pod.write_all(_rendered(ca, keys, {}, plain_keys=False))
    assert pod.ssh(ALICE, key, "true").returncode == 255


def test_with_certificates_only_a_group_pod_refuses_members_uploaded_keys_and_takes_their_certificates(
    pod: LoginPod, tmp_path: Path
) -> None:
    """A group's pod rendered with plain keys (the default) lets members in with their keys; rendered
    with ssh_ca.plain_keys false it withdraws every member's keys from sshd while it runs, and each
    member's certificate lets them in as themselves (their principals file stays)."""
    ca = make_key(tmp_path, "ca")
    keys = {person: make_key(tmp_path, person.name) for person in (ALICE, BOB)}
    groups = {LAB[0]: (LAB[1], [ALICE, BOB])}
    pod.write_all(_rendered(ca, keys, groups, plain_keys=True))
    pod.start_group(*LAB, make_emptydir(tmp_path / "homes"))
    for person, key in keys.items():
        _wait_for(_logs_in(pod, person, key), f"{person.name}'s key taken")  # once their home is theirs

    pod.write_all(_rendered(ca, keys, groups, plain_keys=False))
    assert not [path.name for path in pod.config.iterdir() if path.name.endswith(".keys")]
    _wait_for(lambda: not _logs_in(pod, ALICE, keys[ALICE])(), "alice's key refused")
    assert pod.ssh(BOB, keys[BOB], "true").returncode == 255
    for person, key in keys.items():
        _certify(ca, key, person.name)
        result = pod.ssh(person, key, "id -un")
        assert result.returncode == 0 and result.stdout == f"{person.name}\n", result.stderr
