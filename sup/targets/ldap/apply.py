"""Perform a plan: pipelined writes in dependency order, one result per change.

Phases, each pipelined, each finished before the next starts (the server may run the writes of
one phase in any order):
1. SUP's OUs that are missing;
2. user and sudoRole entries;
3. group entries, with their members (after the users, so the memberof overlay can set memberOf);
4. attribute updates, and one membership modify per group merging all its adds and removes;
5. deletes, deepest entries first.
A user whose create failed is left out of the memberships of later phases (a member DN naming no
entry helps nobody), and those membership changes fail with a reason, for that user.

Writes are idempotent, so a plan that went stale (somebody made the same change meanwhile) still
applies: a delete of an entry already gone succeeds; a membership modify uses the permissive-modify
control where the server offers it (OpenLDAP does not), and otherwise, refused because a value is
already there or already gone, is retried value by value, each "already so" counting as done.
Report changes write nothing; those with an `error` come back as failures of their subject.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from sup.targets.base import (
    ADD_MEMBERS,
    CREATE,
    DELETE,
    REMOVE_MEMBERS,
    REPORT,
    UPDATE,
    ApplyReport,
    Failure,
)
from sup.targets.ldap import dn as dnlib
from sup.targets.ldap.connection import (
    ATTRIBUTE_OR_VALUE_EXISTS,
    NO_SUCH_ATTRIBUTE,
    NO_SUCH_OBJECT,
    LdapConnection,
    Outcome,
    Pipeline,
    Write,
)
from sup.targets.ldap.diff import dn_of, values_of
from sup.targets.ldap.layout import GROUP, OU, USER, Layout
from sup.targets.ldap.model import (
    EntryWrite,
    LdapChange,
    LdapDetails,
    MemberAdd,
    MemberRemove,
    NotWritten,
)

DetailsT = TypeVar("DetailsT", bound=LdapDetails)


@dataclass
class _Op:
    write: Write
    changes: list[LdapChange]
    # a group create's membership values: their users are not added when it fails
    members: list[str] = field(default_factory=list)
    # a membership modify refused for a value already there or gone: the same, value by value
    # (adds, then removes)
    fallback: tuple[list[_Op], list[_Op]] | None = None


@dataclass
class _Run:
    connection: LdapConnection
    layout: Layout
    pipeline: Pipeline
    report: ApplyReport = field(default_factory=ApplyReport)
    failed_users: set[str] = field(default_factory=set)

    def fail(self, change: LdapChange, error: str) -> None:
        self.report.failed.append(Failure(change, error))

    def fail_op(self, op: _Op, error: str) -> None:
        """Every change of `op` failed; for a group create, so did adding each of its members."""
        for change in op.changes:
            self.fail(change, error)
        for value in op.members:
            user = self.layout.username_of_member(value)
            if user is not None and value != self.layout.placeholder:
                group = op.changes[0]
                self.fail(replace(group, subject=user), f"not added to group {group.name}: {error}")

    def execute(self, ops: Sequence[_Op], tolerated: Callable[[_Op, Outcome], bool] | None = None) -> None:
        """Send `ops`; record each change as applied or failed."""
        if self.pipeline.broken:
            for op in ops:
                self.fail_op(op, f"not attempted: {self.pipeline.broken}")
            return
        outcomes = self.pipeline.run([op.write for op in ops])
        retry = []
        for op, outcome in zip(ops, outcomes, strict=True):
            if outcome.ok or (tolerated is not None and tolerated(op, outcome)):
                self.report.applied.extend(op.changes)
                continue
            if op.fallback is not None and outcome.code in (ATTRIBUTE_OR_VALUE_EXISTS, NO_SUCH_ATTRIBUTE):
                retry.append(op.fallback)
                continue
            self.fail_op(op, f"{op.write.operation} {op.write.dn}: {outcome}")
        if retry:
            adds = [o for one_by_one, _ in retry for o in one_by_one]
            removes = [o for _, one_by_one in retry for o in one_by_one]
            self.execute(adds, tolerated=lambda _op, outcome: outcome.code == ATTRIBUTE_OR_VALUE_EXISTS)
            self.execute(removes, tolerated=lambda _op, outcome: outcome.code == NO_SUCH_ATTRIBUTE)


def apply_changes(
    connection: LdapConnection, layout: Layout, changes: Sequence[LdapChange], depth: int
) -> ApplyReport:
    run = _Run(connection, layout, Pipeline(connection, depth))
    for change in changes:
        if change.action == REPORT and isinstance(change.details, NotWritten) and change.details.error:
            run.fail(change, change.details.error)

    creates = [c for c in changes if c.action == CREATE]
    ous = sorted((c for c in creates if c.kind == OU), key=lambda c: _depth(c))
    run.execute([_Op(_add(_details(c, EntryWrite)), [c]) for c in ous])

    entries = [c for c in creates if c.kind not in (OU, GROUP)]
    run.execute([_Op(_add(_details(c, EntryWrite)), [c]) for c in entries])
    run.failed_users = {
        f.change.name for f in run.report.failed if f.change.kind == USER and f.change.action == CREATE
    }

    run.execute([_group_create(run, c) for c in creates if c.kind == GROUP])

    updates = [_Op(_update(_details(c, EntryWrite)), [c]) for c in changes if c.action == UPDATE]
    run.execute(updates + _membership_ops(run, changes))

    deletes = [c for c in changes if c.action == DELETE]
    by_depth: dict[int, list[LdapChange]] = defaultdict(list)
    for change in deletes:
        by_depth[_depth(change)].append(change)
    for level in sorted(by_depth, reverse=True):
        ops = [_Op(Write("delete", dn_of(c.details)), [c]) for c in by_depth[level]]
        run.execute(ops, tolerated=lambda _op, outcome: outcome.code == NO_SUCH_OBJECT)
    return run.report


def _details(change: LdapChange, kind: type[DetailsT]) -> DetailsT:
    """The details of `change`, which its action says are a `kind` (diff.py builds them so)."""
    if not isinstance(change.details, kind):
        raise TypeError(f"{change.action} {change.kind} {change.name}: unexpected details {change.details!r}")
    return change.details


def _depth(change: LdapChange) -> int:
    return dnlib.depth(dn_of(change.details))


def _attributes(details: EntryWrite) -> dict[str, list[str]]:
    return {k: values for k, v in details.attributes.items() if (values := values_of(v.new))}


def _add(details: EntryWrite) -> Write:
    return Write("add", details.dn, attributes=_attributes(details))


def _update(details: EntryWrite) -> Write:
    modifications: dict[str, list[tuple[str, list[str]]]] = {}
    for attribute, diff in details.attributes.items():
        new = values_of(diff.new)
        if attribute == "objectClass":
            present = {c.lower() for c in values_of(diff.old)}
            modifications[attribute] = [("add", [c for c in new if c.lower() not in present])]
        else:
            modifications[attribute] = [("replace", new)]
    return Write("modify", details.dn, modifications=modifications)


def _group_create(run: _Run, change: LdapChange) -> _Op:
    """A group's add, without members whose own create just failed."""
    layout = run.layout
    attribute = layout.member_attribute
    details = _details(change, EntryWrite)
    wanted = details.attributes.get(attribute)
    members = values_of(wanted.new) if wanted is not None else []
    kept, dropped = _without_failed_users(run, members)
    for user in dropped:
        run.fail(
            replace(change, subject=user), f"not added to group {change.name}: creating user {user} failed"
        )
    if not kept and layout.placeholder is not None:
        kept = [layout.placeholder]
    attributes = _attributes(details)
    attributes.pop(attribute, None)
    if kept:
        attributes[attribute] = kept
    return _Op(Write("add", details.dn, attributes=attributes), [change], members=kept)


def _without_failed_users(run: _Run, values: list[str]) -> tuple[list[str], list[str]]:
    """(the values to write, the users left out because creating them failed)."""
    if not run.failed_users:
        return values, []
    kept, dropped = [], []
    for value in values:
        user = run.layout.username_of_member(value) if value != run.layout.placeholder else None
        if user is not None and user in run.failed_users:
            dropped.append(user)
        else:
            kept.append(value)
    return kept, dropped


def _membership_ops(run: _Run, changes: Sequence[LdapChange]) -> list[_Op]:
    """One modify per group: all its member adds and removes together, atomically, so a group that
    loses its last member gains the placeholder in the same write (groupOfNames must have a member)."""
    layout = run.layout
    attribute = layout.member_attribute
    groups: dict[str, list[LdapChange]] = defaultdict(list)
    for change in changes:
        if change.action in (ADD_MEMBERS, REMOVE_MEMBERS):
            groups[dnlib.normalize(dn_of(change.details))].append(change)
    ops = []
    for group_changes in groups.values():
        adds: list[tuple[LdapChange, str]] = []
        removes: list[tuple[LdapChange, str]] = []
        for change in group_changes:
            if change.action == ADD_MEMBERS:
                value = _details(change, MemberAdd).value
                _, dropped = _without_failed_users(run, [value])
                if dropped:
                    run.fail(change, f"not added to group {change.name}: creating user {dropped[0]} failed")
                else:
                    adds.append((change, value))
            else:
                removes.append((change, _details(change, MemberRemove).value))
        planned_adds = any(c.action == ADD_MEMBERS for c in group_changes)
        if planned_adds and not adds and layout.placeholder is not None:
            # every new member was dropped: the placeholder must stay, or the group could end up empty
            for change, _ in [r for r in removes if r[1] == layout.placeholder]:
                run.fail(change, f"kept: no member could be added to group {change.name}")
            removes = [r for r in removes if r[1] != layout.placeholder]
        if not adds and not removes:
            continue
        operations: list[tuple[str, list[str]]] = []
        if adds:
            operations.append(("add", [v for _, v in adds]))
        if removes:
            operations.append(("delete", [v for _, v in removes]))
        dn = dn_of(group_changes[0].details)
        write = Write("modify", dn, modifications={attribute: operations}, permissive=True)
        fallback = (
            [_Op(Write("modify", dn, modifications={attribute: [("add", [v])]}), [c]) for c, v in adds],
            [_Op(Write("modify", dn, modifications={attribute: [("delete", [v])]}), [c]) for c, v in removes],
        )
        ops.append(_Op(write, [c for c, _ in adds] + [c for c, _ in removes], fallback=fallback))
    return ops
