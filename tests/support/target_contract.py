"""The target contract: what every target must do, as tests it inherits.

A target's tests/<target>/test_contract.py subclasses `TargetContract` (as `Test<Target>Contract`, so
pytest collects it), gets its `site` fixture (a tests/support/site.py TargetSite) from its directory's
conftest, and supplies the hooks below: what the target holds of a user, a snapshot of everything it
could have written, a piece of drift made by hand, an object it must never touch, and a read that
fails or comes back truncated. The tests drive passes the way the reconciler does, through
`run_pass` (the site's plan/reconcile), and hold every target to the same promises:

- the first pass converges: what the store says is there, and the next plan is empty;
- the second pass writes nothing: no change, no write sent, nothing changed on the server;
- a failed or truncated read deletes nothing: the pass reports an error and writes nothing;
- foreign objects are never touched, even by a pass that deletes SUP's own stale objects;
- drift made by hand is seen by plan and repaired by reconcile.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from tests.support.site import TargetSite

S = TypeVar("S", bound=TargetSite[Any])

# The store every contract test starts from: three users, all in one group.
USERS = ("kim", "saul", "lalo")
GROUP = "physics"
STALE = "lalo"  # the user a test removes from the store, whose objects become SUP's stale ones


class TargetContract(Generic[S]):
    # --- hooks: what a target's contract supplies ----------------------------------------------------

    read_error: ClassVar[tuple[str, ...]] = ()  # texts the error of a broken read must contain

    def populate(self, site: S) -> None:
        """Fill the store with USERS in GROUP (a target adds what it needs more, such as a Slurm
        account for the group)."""
        for name in USERS:
            site.add_user(name)
        site.add_group(GROUP, members=list(USERS))

    def holds(self, site: S, username: str) -> bool:
        """Whether the server holds the objects SUP makes for this (active) user."""
        raise NotImplementedError

    def snapshot(self, site: S) -> object:
        """Everything of the site's part of the server that a write could change, including what the
        server changes with every write where it keeps that (LDAP's entryCSN, Kubernetes'
        resourceVersion, slurmdbd's transaction log): equal snapshots mean nothing was written."""
        raise NotImplementedError

    def make_drift(self, site: S) -> set[tuple[str, str, str]]:
        """Change, by hand on the server, things SUP set after a converged pass; return the changes
        (action, kind, name) a plan must then show."""
        raise NotImplementedError

    def drift_repaired(self, site: S) -> bool:
        """Whether what make_drift changed is back as SUP set it."""
        raise NotImplementedError

    def add_foreign(self, site: S) -> None:
        """Create, by hand, objects the target must never touch (not SUP's, or excluded by settings;
        the hook may change the site's settings for that)."""
        raise NotImplementedError

    def foreign(self, site: S) -> object:
        """The state of the foreign objects (with the server's write markers): compared for equality."""
        raise NotImplementedError

    def break_read(self, site: S) -> None:
        """Make the target's next read fail or come back truncated (the hook may change the site's
        settings for that): the read must raise, so the pass plans nothing."""
        raise NotImplementedError

    # --- the contract --------------------------------------------------------------------------------

    def test_the_first_pass_converges(self, site: S) -> None:
        self.populate(site)
        assert not any(self.holds(site, name) for name in USERS)

        first = site.reconcile()
        (target,) = first.targets
        assert (target.target, target.state) == (site.target, "applied"), (target.error, target.failed)
        assert target.changes and target.failed == []
        assert {c.action for c in target.changes} >= {"create"}
        assert all(self.holds(site, name) for name in USERS)
        assert site.statuses() == dict.fromkeys(USERS, ("in_sync", None))

        planned = site.plan()
        assert planned.targets[0].state == "planned"
        assert planned.changes == [], [c.as_json() for c in planned.changes]

    def test_the_second_pass_writes_nothing(self, site: S) -> None:
        self.populate(site)
        first = site.reconcile()
        assert first.ok and first.changes and site.last_writes > 0
        before = self.snapshot(site)

        second = site.reconcile()
        (target,) = second.targets
        assert target.state == "planned"  # nothing to apply: apply was not even called
        assert target.changes == [] and target.applied == [], [c.as_json() for c in target.changes]
        assert site.last_writes == 0
        assert self.snapshot(site) == before

    def test_a_failed_or_truncated_read_deletes_nothing(self, site: S) -> None:
        self.populate(site)
        site.converge()
        site.delete_user(STALE)  # a pass that could read would delete the user's objects
        self.break_read(site)
        before = self.snapshot(site)

        result = site.reconcile(force=True)  # not even a forced pass deletes on a partial read
        (target,) = result.targets
        assert target.state == "error", (target.state, target.changes)
        assert all(text in (target.error or "") for text in self.read_error), target.error
        assert result.changes == [] and target.applied == []
        assert site.last_writes == 0
        assert self.snapshot(site) == before
        assert self.holds(site, STALE)
        # Every user's status says why, the one whose removal has not happened too.
        assert {name: state for name, (state, _) in site.statuses().items()} == dict.fromkeys(USERS, "error")

    def test_foreign_objects_are_never_touched(self, site: S) -> None:
        self.populate(site)
        site.converge()
        self.add_foreign(site)
        before = self.foreign(site)
        assert before  # the hook made something to look after

        site.delete_user(STALE)
        result = site.reconcile()
        (target,) = result.targets
        assert target.state == "applied", (target.error, target.failed)
        assert target.applied  # SUP's own stale objects went...
        assert not self.holds(site, STALE)
        assert all(self.holds(site, name) for name in USERS if name != STALE)
        assert self.foreign(site) == before  # ...and the foreign ones stayed as they were

        again = site.reconcile(force=True)
        assert again.ok and site.last_writes == 0
        assert self.foreign(site) == before

    def test_drift_is_seen_by_plan_and_repaired_by_reconcile(self, site: S) -> None:
        self.populate(site)
        site.converge()
        assert self.drift_repaired(site)
        expected = self.make_drift(site)
        assert not self.drift_repaired(site)  # the hook changed something

        planned = site.plan()
        assert planned.targets[0].state == "planned"
        assert {(c.action, c.kind, c.name) for c in planned.changes} == expected
        assert not self.drift_repaired(site)  # a plan writes nothing

        site.converge()  # repairs, and the pass after it has nothing to do
        assert self.drift_repaired(site)
