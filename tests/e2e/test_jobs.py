"""Slurm jobs of the people SUP provisions, on a real slurmctld + slurmd (tests/support/slurmctld.py):
`sup serve` writes a person into LDAP (read by the node's sssd) and their association into slurmdbd,
and then they run `srun`/`sbatch` as themselves; no association, no job; suspended, no new job."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable

import httpx

from tests.e2e.stack import Stack, statuses, wait_until
from tests.support.server import SupServer
from tests.support.slurmctld import JobCluster, SlurmController

API = "/api/v1"
REFUSED = "Invalid account or account/partition combination specified"


def _post(server: SupServer, headers: dict[str, str], path: str, body: dict[str, object]) -> None:
    response = httpx.post(f"{server.url}{API}/{path}", json=body, headers=headers, timeout=30)
    assert response.status_code == 201, response.text


def _onboard(server: SupServer, headers: dict[str, str], *users: str, group: str = "physics") -> None:
    """`group` bound to the Slurm account `phys`, and `users` in it."""
    _post(server, headers, "groups", {"name": group})
    _post(server, headers, "slurm/accounts", {"name": "phys", "group": group})
    for user in users:
        _post(server, headers, "users", {"username": user, "groups": [group]})


def _active(server: SupServer, headers: dict[str, str], user: str, active: bool) -> None:
    response = httpx.patch(
        f"{server.url}{API}/users/{user}", json={"active": active}, headers=headers, timeout=30
    )
    assert response.status_code == 200, response.text


def _jobs(stack: Stack) -> SlurmController:
    assert stack.jobs is not None
    return stack.jobs.controller


def _id_in_the_directory(stack: Stack, user: str) -> str:
    """What `id USER` prints on the node (NSS through sssd, i.e. SUP's directory)."""
    assert stack.jobs is not None
    printed = stack.jobs.sssd.id(user)
    assert printed is not None, f"{user} is not known on the node"
    return printed


def test_a_provisioned_person_runs_srun_as_themselves(
    make_job_stack: Callable[..., Stack], slurm_jobs: JobCluster
) -> None:
    stack = make_job_stack()
    server = stack.serve()
    admin = stack.token()
    started = time.monotonic()
    _onboard(server, admin, "kim")
    first = _jobs(stack).first_job("kim", "phys", timeout=60)
    job = first.job
    print(
        f"POST to the association in slurmdbd {first.association_seconds:.2f} s, to the first srun done"
        f" {time.monotonic() - started:.2f} s ({first.attempts} srun, the last {job.seconds:.2f} s)"
    )

    expected = _id_in_the_directory(stack, "kim")
    assert job.stdout.strip() == expected  # the job ran on the node as kim, with kim's groups
    uid, gid = (stack.getent("kim") or "").split(":")[2:4]
    assert expected.startswith(f"uid={uid}(kim) gid={gid}(kim) groups=") and "(physics)" in expected
    again = _jobs(stack).srun("kim", "-A", "phys", "id")
    assert again.returncode == 0 and again.stdout.strip() == expected
    print(f"srun -A phys id, association known: {again.seconds:.2f} s")
    assert statuses(server, admin, "kim") == {"ldap": "in_sync", "slurm": "in_sync", "kube": "disabled"}


def _host_address() -> str:
    """An address of this host other than loopback, as a pod on the bridge would be given."""
    shown = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True, check=True
    ).stdout
    addresses = [line.split()[3].split("/")[0] for line in shown.splitlines()]
    assert addresses, "this test needs an IPv4 address other than loopback"
    return addresses[0]


def test_a_client_slurm_conf_reaches_the_controller_and_the_node_by_address(
    make_job_stack: Callable[..., Stack],
) -> None:
    """What a login pod gets (client_conf + munge's default socket) runs jobs: the daemons listen on
    every address, and srun finds the controller and the node at the address it is given."""
    stack = make_job_stack()
    server = stack.serve()
    _onboard(server, stack.token(), "kim")
    jobs = _jobs(stack)
    jobs.first_job("kim", "phys", timeout=60)
    address = _host_address()
    conf = jobs.write_client_conf(address)
    assert f"({address})" in conf.read_text() and "AuthInfo" not in conf.read_text()

    job = jobs.run_as("kim", jobs.bin["srun"], "-A", "phys", "id", conf=conf)
    assert job.returncode == 0, job.output
    assert job.stdout.strip() == _id_in_the_directory(stack, "kim")
    submitted = jobs.run_as(
        "kim", jobs.bin["sbatch"], "--parsable", "-A", "phys", "--wrap", "true", conf=conf
    )
    assert submitted.returncode == 0, submitted.output
    assert jobs.wait_job(submitted.stdout.strip().split(";")[0]) == "COMPLETED"
    assert len(jobs.munge_key) >= 32
    for daemon in ("slurmctld", "slurmd"):  # listening at the address the client was given
        with socket.create_connection((address, jobs.ports[daemon][0]), timeout=5):
            pass


def test_an_sbatch_job_completes_and_its_output_shows_the_person(
    make_job_stack: Callable[..., Stack],
) -> None:
    stack = make_job_stack()
    server = stack.serve()
    admin = stack.token()
    _onboard(server, admin, "saul")
    jobs = _jobs(stack)
    jobs.first_job("saul", "phys", timeout=60)

    started = time.monotonic()
    submitted = jobs.sbatch("saul", "-A", "phys", "-o", "out-%j.txt", "--wrap", "id; whoami")
    assert submitted.returncode == 0, submitted.output
    job_id = submitted.stdout.strip().split(";")[0]
    assert jobs.wait_job(job_id) == "COMPLETED", jobs.logs()
    print(f"sbatch --wrap to COMPLETED: {time.monotonic() - started:.2f} s")
    output = jobs.jobs_dir / f"out-{job_id}.txt"
    assert output.read_text().splitlines() == [_id_in_the_directory(stack, "saul"), "saul"]
    uid = int((stack.getent("saul") or "").split(":")[2])
    assert output.stat().st_uid == uid  # written by the job, as saul


def test_a_person_without_an_association_is_refused(make_job_stack: Callable[..., Stack]) -> None:
    stack = make_job_stack()
    server = stack.serve()
    admin = stack.token()
    _onboard(server, admin, "kim")
    _post(server, admin, "groups", {"name": "visitors"})  # bound to no Slurm account
    _post(server, admin, "users", {"username": "lee", "groups": ["visitors"]})
    jobs = _jobs(stack)
    jobs.first_job("kim", "phys", timeout=60)
    wait_until(lambda: stack.getent("lee") is not None, what="lee on the node")
    assert ("phys", "lee") not in stack.associations()

    for args in (["-A", "phys"], []):
        refused = jobs.srun("lee", *args, "id")
        assert refused.returncode != 0 and "uid=" not in refused.stdout
        assert REFUSED in refused.stderr, refused.stderr
    refused = jobs.sbatch("lee", "-A", "phys", "--wrap", "id")
    assert refused.returncode != 0 and REFUSED in refused.stderr, refused.output


def test_a_suspended_persons_new_jobs_are_refused_and_run_again_after_reactivation(
    make_job_stack: Callable[..., Stack],
) -> None:
    stack = make_job_stack()
    server = stack.serve()
    admin = stack.token()
    _onboard(server, admin, "kim", "saul")
    jobs = _jobs(stack)
    jobs.first_job("kim", "phys", timeout=60)

    suspended = time.monotonic()
    _active(server, admin, "kim", False)
    seconds = wait_until(
        lambda: REFUSED in jobs.srun("kim", "-A", "phys", "id").stderr, timeout=30, what="kim refused"
    )
    print(f"suspension (API PATCH) to kim's srun refused: {time.monotonic() - suspended:.2f} s")
    assert seconds < 30
    assert ("phys", "kim") not in stack.associations()
    assert jobs.srun("saul", "-A", "phys", "true").returncode == 0  # the others still run jobs

    reactivated = time.monotonic()
    _active(server, admin, "kim", True)
    job = jobs.first_job("kim", "phys", timeout=60).job
    print(f"reactivation to kim's srun done: {time.monotonic() - reactivated:.2f} s")
    assert job.stdout.startswith("uid=") and "(kim)" in job.stdout


def test_a_suspended_person_with_a_running_job_cannot_submit_more_under_the_default_offboarding(
    make_job_stack: Callable[..., Stack],
) -> None:
    """`slurm.offboarding: remove` (the default): slurmdbd refuses to remove an association while a
    job of its user runs, so SUP blocks it (MaxSubmitJobs=0) first; the running job goes on, no new
    job starts, and the association goes once the job has ended."""
    stack = make_job_stack()
    server = stack.serve()
    admin = stack.token()
    _onboard(server, admin, "kim")
    jobs = _jobs(stack)
    jobs.first_job("kim", "phys", timeout=60)
    submitted = jobs.sbatch("kim", "-A", "phys", "-o", "/dev/null", "--wrap", "sleep 300")
    job_id = submitted.stdout.strip().split(";")[0]
    wait_until(lambda: jobs.job_state(job_id) == "RUNNING", what="kim's job running")

    suspended = time.monotonic()
    _active(server, admin, "kim", False)
    wait_until(lambda: jobs.srun("kim", "-A", "phys", "true").returncode != 0, what="kim refused")
    print(f"suspension with a running job to kim's srun refused: {time.monotonic() - suspended:.2f} s")
    refused = jobs.srun("kim", "-A", "phys", "id")
    assert refused.returncode != 0 and "uid=" not in refused.stdout, refused.output
    assert ("phys", "kim") in stack.associations()  # slurmdbd refused the removal: kept, blocked
    assert jobs.job_state(job_id) == "RUNNING"

    jobs.cancel(job_id)
    assert jobs.wait_job(job_id) == "CANCELLED"
    stack.sup("reconcile")
    assert ("phys", "kim") not in stack.associations()


def test_staged_offboarding_keeps_a_running_job_and_blocks_new_ones_using_squeue(
    make_job_stack: Callable[..., Stack],
) -> None:
    """`slurm.running_jobs_command` is the real squeue: a suspended person whose job still runs keeps
    the (blocked) association until the job ends; one with no job loses it at once."""
    stack = make_job_stack()
    jobs = _jobs(stack)
    stack.config["slurm"].update(
        offboarding="staged",
        offboarding_deadline="7d",
        running_jobs_command=jobs.as_root_argv("squeue", "-h", "-t", "PD,R,CG,S", "-o", "%u"),
    )
    server = stack.serve()
    admin = stack.token()
    _onboard(server, admin, "kim", "saul")
    jobs.first_job("kim", "phys", timeout=60)
    jobs.first_job("saul", "phys", timeout=60)
    submitted = jobs.sbatch("kim", "-A", "phys", "-o", "/dev/null", "--wrap", "sleep 300")
    job_id = submitted.stdout.strip().split(";")[0]
    wait_until(lambda: jobs.job_state(job_id) == "RUNNING", what="kim's job running")

    _active(server, admin, "kim", False)
    _active(server, admin, "saul", False)
    wait_until(lambda: ("phys", "saul") not in stack.associations(), what="saul's association removed")
    assert ("phys", "kim") in stack.associations()  # blocked: MaxSubmitJobs=0 while the job runs
    wait_until(lambda: jobs.srun("kim", "-A", "phys", "true").returncode != 0, what="kim blocked")
    blocked = jobs.srun("kim", "-A", "phys", "id")
    assert blocked.returncode != 0 and "uid=" not in blocked.stdout, blocked.output
    print(f"a blocked association refuses srun with: {blocked.stderr.strip()}")
    assert jobs.job_state(job_id) == "RUNNING"

    jobs.cancel(job_id)
    assert jobs.wait_job(job_id) == "CANCELLED"
    stack.sup("reconcile")
    assert ("phys", "kim") not in stack.associations()
