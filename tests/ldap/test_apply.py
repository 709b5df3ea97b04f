"""apply's order and bookkeeping, with a recording connection in place of a server (the real
server runs in every other test here): phases in dependency order, every change accounted for once,
and a connection that breaks midway fails what was not answered instead of hiding it."""

from __future__ import annotations

from sup.targets.base import ApplyReport
from sup.targets.ldap.apply import apply_changes
from sup.targets.ldap.connection import Outcome, Write
from sup.targets.ldap.diff import plan
from sup.targets.ldap.model import LdapChange
from tests.ldap.plans import EMPTY, layout, simulate, state, user

SHAPE = layout(admin_groups=("ops",))


class RecordingConnection:
    """Records every write and answers it with success (or breaks after `break_after` answers)."""

    url = "ldap://recording"

    def __init__(self, break_after: int | None = None) -> None:
        self.sent: list[Write] = []
        self.break_after = break_after
        self.writes = 0

    def send(self, write: Write) -> int:
        self.sent.append(write)
        self.writes += 1
        return len(self.sent)

    def answer(self, write: Write) -> Outcome:
        return Outcome(0, "success", "")

    def outcome(self, message_id: int) -> Outcome:
        if self.break_after is not None and message_id > self.break_after:
            from ldap3.core.exceptions import LDAPSocketReceiveError

            raise LDAPSocketReceiveError("connection reset by peer")
        return self.answer(self.sent[message_id - 1])


def _apply(changes: list[LdapChange], connection: RecordingConnection, depth: int = 4) -> ApplyReport:
    return apply_changes(connection, SHAPE, changes, depth)  # type: ignore[arg-type]


FIRST = state(
    [user("ann", 10000), user("bob", 10001)],
    {"physics": (50000, frozenset({"ann", "bob"})), "ops": (50001, frozenset({"ann"}))},
)


def _accounted_once(changes: list[LdapChange], report: ApplyReport) -> bool:
    """Each change (but a report without an error, which writes nothing) applied or failed, not both."""
    failed = [f.change for f in report.failed]
    return all(
        (c in report.applied) != (c in failed)
        for c in changes
        if c.action != "report" or "error" in c.details_json()
    )


def test_creates_go_ous_then_users_and_sudo_roles_then_groups() -> None:
    changes = plan(FIRST, EMPTY, SHAPE)
    connection = RecordingConnection()
    report = _apply(changes, connection)
    assert report.failed == [] and len(report.applied) == len(changes)
    parents = [w.dn.split(",", 1)[1] for w in connection.sent]
    order = [0 if p == "dc=example,dc=org" else 2 if p.startswith("ou=groups") else 1 for p in parents]
    assert order == sorted(order) and set(order) == {0, 1, 2}


def test_memberships_go_before_deletes_and_merge_into_one_write_per_group() -> None:
    before = state(
        [user("ann", 10000), user("bob", 10001), user("zed", 10002)], {"physics": (50000, frozenset({"zed"}))}
    )
    observed = simulate(EMPTY, plan(before, EMPTY, SHAPE), SHAPE)
    after = state([user("ann", 10000), user("bob", 10001)], {"physics": (50000, frozenset({"ann", "bob"}))})
    changes = plan(after, observed, SHAPE)
    connection = RecordingConnection()
    report = _apply(changes, connection)
    assert report.failed == [] and _accounted_once(changes, report)
    assert [w.operation for w in connection.sent] == ["modify", "delete", "delete"]
    membership = connection.sent[0].modifications["member"]
    assert [how for how, _ in membership] == ["add", "delete"] and len(membership[0][1]) == 2


def test_a_broken_connection_fails_what_had_no_answer_and_sends_nothing_more() -> None:
    changes = plan(FIRST, EMPTY, SHAPE)
    connection = RecordingConnection(break_after=4)
    report = _apply(changes, connection, depth=2)
    assert _accounted_once(changes, report)
    assert len(report.applied) == 4
    errors = [f.error for f in report.failed if f.change in changes]
    assert any("unknown (-1): the connection to ldap://recording failed" in e for e in errors)
    assert any(e.startswith("not attempted: the connection to ldap://recording failed") for e in errors)
    assert all("connection reset by peer" in e for e in errors)
    members = {f.change.subject for f in report.failed if f.change.name == "physics" and f.change.subject}
    assert members == {"ann", "bob"}  # physics was never written: neither is in sync
    assert len(connection.sent) < len(changes)  # the phases after the break sent nothing


def test_a_refused_group_create_is_an_error_of_each_of_its_members() -> None:
    class RefusesPhysics(RecordingConnection):
        def answer(self, write: Write) -> Outcome:
            if write.dn.startswith("cn=physics,"):
                return Outcome(65, "objectClassViolation", "no structural object class")
            return Outcome(0, "success", "")

    report = _apply(plan(FIRST, EMPTY, SHAPE), RefusesPhysics())
    assert {(f.change.name, f.change.subject) for f in report.failed} == {
        ("physics", None),
        ("physics", "ann"),
        ("physics", "bob"),
    }
    assert all("objectClassViolation (65)" in f.error for f in report.failed)
