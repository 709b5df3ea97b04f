"""The Slurm target on a pass the outbox scoped (run_pass scoped=True, the reconciler's pass after
writes): it reads only the named users' rows (and the accounts'), plans only their changes, leaves
other drift to the full pass, and removes nobody it did not name."""

from __future__ import annotations

from collections.abc import Callable

from sup.reconcile.planner import TargetPass, run_pass
from sup.store.outbox import mark_dirty
from tests.slurm import helpers as h
from tests.slurm.site import Site

MEMBERS = [f"m{i:02d}" for i in range(10)]


def _pass(site: Site, *, scoped: bool) -> TargetPass:
    result = run_pass(site.settings, site.sessions, apply=True, scoped=scoped, opener=site._open)
    (slurm,) = [t for t in result.targets if t.target == "slurm"]
    assert slurm.state in ("applied", "planned"), (slurm.state, slurm.error, slurm.failed)
    return slurm


def _summary(slurm: TargetPass) -> set[tuple[str, str, str]]:
    return {(c.action, c.kind, c.name) for c in slurm.changes}


def _science(site: Site) -> None:
    for group in ("physics", "chemistry"):
        site.add_group(group)
    h.add_user(site.sessions, site.settings, "kim", "physics")
    h.add_user(site.sessions, site.settings, "saul", "physics", "chemistry")
    for name in MEMBERS:
        h.add_user(site.sessions, site.settings, name, "physics")
    site.add_account("phys", group="physics")
    site.add_account("chem", group="chemistry")
    site.converge()
    _pass(site, scoped=False)  # clears the outbox


def _remark(site: Site, *users: str) -> None:
    with site.sessions.begin() as session:
        for user in users:
            mark_dirty(session, "user", user)


def test_a_scoped_pass_reads_and_plans_only_the_named_users(site: Site) -> None:
    _science(site)
    # drift nobody reported: a limit set by hand on m01's association, and an account row's
    site.sacctmgr(
        "modify", "user", "m01", "where", f"cluster={site.cluster}", "account=phys", "set", "MaxJobs=5"
    )
    site.sacctmgr("modify", "account", "chem", "where", f"cluster={site.cluster}", "set", "MaxJobs=7")

    h.add_user(site.sessions, site.settings, "lalo", "physics")  # push to login
    h.change_user(site.sessions, site.settings, "kim", active=False)  # blocked, then removed
    scoped = _pass(site, scoped=True)

    assert scoped.scoped and scoped.state == "applied"
    assert _summary(scoped) == {
        ("create", "association", "phys/lalo"),
        ("update", "association", "phys/kim"),
        ("delete", "association", "phys/kim"),
    }
    assert site.targets[-1].sacctmgr.reads <= 5  # clusters, accounts, account rows, the users' rows
    users = {u for _, u, _ in site.associations()}
    assert "lalo" in users and "kim" not in users and set(MEMBERS) <= users
    assert h.defaults(site.slurmdbd, site.cluster)["lalo"] == "phys"

    full = _pass(site, scoped=False)
    assert not full.scoped and _summary(full) == {
        ("update", "association", "phys/m01"),
        ("update", "account", "chem"),
    }

    _remark(site, "lalo", "kim", "saul")
    again = _pass(site, scoped=True)
    assert again.scoped and again.changes == [] and site.last_writes == 0


def test_a_deleted_user_loses_only_their_associations(site: Site) -> None:
    _science(site)
    site.sacctmgr("add", "user", "stranger", "account=phys", f"cluster={site.cluster}")  # not SUP's
    site.delete_user("saul")
    scoped = _pass(site, scoped=True)
    assert scoped.scoped and _summary(scoped) == {
        ("delete", "association", "chem/saul"),
        ("delete", "association", "phys/saul"),
    }
    users = {u for _, u, _ in site.associations()}
    assert "saul" not in users and "stranger" in users

    full = _pass(site, scoped=False)
    assert _summary(full) == {("delete", "association", "phys/stranger")}


def test_staged_offboarding_blocks_on_a_scoped_pass(make_site: Callable[..., Site]) -> None:
    site = make_site(offboarding="staged", offboarding_deadline="7d")
    _science(site)
    h.change_user(site.sessions, site.settings, "saul", active=False)
    scoped = _pass(site, scoped=True)
    assert scoped.scoped and _summary(scoped) == {
        ("update", "association", "chem/saul"),
        ("update", "association", "phys/saul"),
    }
    rows = site.slurmdbd.show(
        "association", "where", f"cluster={site.cluster}", "user=saul", "format=Account,MaxSubmit"
    )
    assert {row[0]: row[1] for row in rows} == {"chem": "0", "phys": "0"}
    _remark(site, "saul")
    assert _pass(site, scoped=True).changes == []  # kept blocked until the deadline


def test_a_pass_after_an_account_changed_reads_everything(site: Site) -> None:
    _science(site)
    site.update_account("phys", fairshare=7)
    assert not _pass(site, scoped=True).scoped
    _remark(site, "kim")
    assert _pass(site, scoped=True).scoped
