"""Offboarding against a real slurmdbd: staged suspension (block new jobs, remove after the deadline)
and a user's default account, which never goes while another association of theirs stays."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path

from tests.slurm import helpers as h
from tests.slurm.site import Site

DAY = datetime.timedelta(days=1)


def _science(site: Site) -> None:
    """phys and chem below root; kim in physics, saul in physics and chemistry (default: chem)."""
    for group in ("physics", "chemistry"):
        site.add_group(group)
    h.add_user(site.sessions, site.settings, "kim", "physics")
    h.add_user(site.sessions, site.settings, "saul", "physics", "chemistry")
    site.add_account("phys", group="physics")
    site.add_account("chem", group="chemistry")


def _max_submit(site: Site, user: str) -> dict[str, str]:
    """account -> MaxSubmit of the user's associations on the site's cluster."""
    rows = site.slurmdbd.show(
        "association", "where", f"cluster={site.cluster}", f"user={user}", "format=Account,MaxSubmit"
    )
    return {row[0]: row[1] for row in rows}


def _suspend(site: Site, user: str) -> None:
    h.change_user(site.sessions, site.settings, user, active=False)


def test_staged_offboarding_blocks_then_removes_after_the_deadline(make_site: Callable[..., Site]) -> None:
    site = make_site(offboarding="staged", offboarding_deadline="7d")
    _science(site)
    site.converge()
    _suspend(site, "saul")

    plan = site.plan().changes
    assert [(c.action, c.kind, c.name) for c in plan] == [
        ("update", "association", "chem/saul"),
        ("update", "association", "phys/saul"),
    ]
    assert plan[0].details_json()["max_submit_jobs"] == {"old": None, "new": "0"}
    site.converge()  # blocked, kept: nothing left to do until the deadline
    assert _max_submit(site, "saul") == {"chem": "0", "phys": "0"}
    assert {u for _, u, _ in site.associations()} == {"kim", "saul"}
    assert h.defaults(site.slurmdbd, site.cluster)["saul"] == "chem"

    site.clock = lambda: datetime.datetime.now(datetime.UTC) + 7 * DAY + datetime.timedelta(minutes=1)
    assert sorted((c.action, c.name) for c in site.plan().changes) == [
        ("delete", "chem/saul"),
        ("delete", "phys/saul"),
    ]
    site.converge()
    assert {u for _, u, _ in site.associations()} == {"kim"}


def test_staged_offboarding_with_a_zero_deadline_blocks_and_removes_in_one_pass(
    make_site: Callable[..., Site],
) -> None:
    site = make_site(offboarding="staged", offboarding_deadline="0s")
    _science(site)
    site.converge()
    _suspend(site, "kim")
    assert [(c.action, c.name) for c in site.plan().changes] == [
        ("update", "phys/kim"),  # the block first: a removal slurmdbd refuses leaves it blocked
        ("delete", "phys/kim"),
    ]
    site.converge()
    assert {u for _, u, _ in site.associations()} == {"saul"}


def test_a_reactivated_user_is_unblocked(make_site: Callable[..., Site]) -> None:
    site = make_site(offboarding="staged")
    _science(site)
    site.converge()
    _suspend(site, "kim")
    site.converge()
    assert _max_submit(site, "kim") == {"phys": "0"}
    h.change_user(site.sessions, site.settings, "kim", active=True)
    site.converge()
    assert _max_submit(site, "kim") == {"phys": ""}


def test_the_default_account_stays_while_another_association_does(site: Site) -> None:
    _science(site)
    site.converge()
    assert h.defaults(site.slurmdbd, site.cluster)["saul"] == "chem"
    _suspend(site, "saul")
    site.slurmdbd.fake_running_job(site.cluster, "phys", "saul", job_id=5151)

    result = site.reconcile().targets[0]
    assert result.state == "partial"
    failed = {f.change.name: f.error for f in result.failed}
    assert set(failed) == {"phys/saul", "chem/saul"}
    assert "Job(s) active" in failed["phys/saul"]
    assert "default account goes last" in failed["chem/saul"] and "Job(s) active" in failed["chem/saul"]
    assert {(a, u) for a, u, _ in site.associations() if u == "saul"} == {("chem", "saul"), ("phys", "saul")}
    assert h.defaults(site.slurmdbd, site.cluster)["saul"] == "chem"

    site.slurmdbd.finish_job(site.cluster, 5151)
    site.converge()
    assert {u for _, u, _ in site.associations()} == {"kim"}


def test_staged_offboarding_after_the_deadline_keeps_the_default_while_a_job_runs(
    make_site: Callable[..., Site],
) -> None:
    site = make_site(offboarding="staged", offboarding_deadline="1h")
    _science(site)
    site.converge()
    _suspend(site, "saul")
    site.converge()
    site.slurmdbd.fake_running_job(site.cluster, "phys", "saul", job_id=5252)
    site.clock = lambda: datetime.datetime.now(datetime.UTC) + DAY

    result = site.reconcile().targets[0]
    assert sorted(f.change.name for f in result.failed) == ["chem/saul", "phys/saul"]
    assert _max_submit(site, "saul") == {"chem": "0", "phys": "0"}  # still blocked
    site.slurmdbd.finish_job(site.cluster, 5252)
    site.converge()
    assert {u for _, u, _ in site.associations()} == {"kim"}


def test_a_running_jobs_command_lets_users_without_jobs_go_before_the_deadline(
    make_site: Callable[..., Site], cluster: str
) -> None:
    sacct = str(Path(make_site().slurmdbd.bin["sacctmgr"]).with_name("sacct"))
    command = [sacct, "-a", "-M", cluster, "-n", "-P", "-X", "-s", "R,PD,S,RQ", "-o", "User"]
    site = make_site(offboarding="staged", offboarding_deadline="7d", running_jobs_command=command)
    _science(site)
    site.converge()
    site.slurmdbd.fake_running_job(site.cluster, "phys", "saul", job_id=5353)
    _suspend(site, "kim")
    _suspend(site, "saul")

    result = site.reconcile()
    assert result.ok, [(f.change.name, f.error) for f in result.targets[0].failed]  # saul: not tried
    assert {u for _, u, _ in site.associations()} == {"saul"}  # kim had nothing running
    assert _max_submit(site, "saul") == {"chem": "0", "phys": "0"}
    site.slurmdbd.finish_job(site.cluster, 5353)
    site.converge()
    assert site.associations() == set()
