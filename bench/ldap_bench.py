"""LDAP target benchmark: SUP's passes against a raw ldap3 load of the same entries, in one run.

    .venv/bin/python bench/ldap_bench.py [--users 10000] [--groups 1000] [--memberships 2]

Starts its own slapd (tests/support/slapd.py: mdb, memberof, refint, the shipped schemas), fills a
SQLite store through SUP's services, then, each into a fresh base DN of that slapd:
1. raw ASYNC: the entries of SUP's first plan, added with ldap3's ASYNC strategy, 64 in flight;
2. raw SAFE_SYNC: the same entries, one add at a time;
3. SUP's first pass (open, observe, diff, apply: the target's work; deriving the desired state from
   the store is timed on its own);
4. SUP's no-change pass: observe and diff, counting searches and writes; and a whole `run_pass`
   (the store read included) as `sup reconcile` runs it;
5. the pass after a write (push to login): one new member of a group, `run_pass(scoped=True)` as
   the reconciler runs it after writes (store read included), its searches against the no-change
   full pass's; then the same scoped pass with nothing to do (its reads alone);
6. SUP's first pass with pipeline_depth=1 (writes one at a time), for the effect of pipelining.
Prints a Markdown table. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ldap3 import ASYNC, SAFE_SYNC, Connection, Server
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.config.targets import target_context
from sup.domain.desired import DesiredState
from sup.domain.status import PassState
from sup.groups.schemas import GroupCreate
from sup.groups.service import create_group
from sup.reconcile.planner import desired_state, run_pass
from sup.store import migrate, outbox
from sup.store.audit import Actor
from sup.store.session import make_engine, make_sessionmaker
from sup.targets.base import CREATE, AnyDetails, Change, Scope, Target
from sup.targets.ldap import SPEC, LdapTarget
from sup.targets.ldap.diff import values_of
from sup.targets.ldap.model import EntryWrite, LdapChange
from sup.targets.spec import TargetContext
from sup.users.schemas import UserCreate
from sup.users.service import create_user
from tests.support.keys import ed25519_key
from tests.support.slapd import SERVICE_DN, SERVICE_PASSWORD, SlapdServer

ACTOR = Actor(name="bench", role="admin")
Entry = tuple[str, dict[str, list[str]]]


@contextmanager
def timed(results: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    results[name] = time.perf_counter() - start


def fill_store(settings: Settings, users: int, groups: int, memberships: int) -> None:
    """Users with one SSH key each, then groups; each user in `memberships` random groups."""
    sessions = make_sessionmaker(make_engine(settings.database_url))
    rng = random.Random(42)  # noqa: S311 - a reproducible sample, not a secret
    names = [f"user{i:05d}" for i in range(users)]
    members: dict[int, list[str]] = {g: [] for g in range(groups)}
    for name in names:
        for g in rng.sample(range(groups), min(memberships, groups)):
            members[g].append(name)
    with sessions.begin() as session:
        for i, name in enumerate(names):
            spec = UserCreate(
                username=name,
                display_name=f"User {i}",
                given_name="User",
                family_name=str(i),
                email=f"{name}@example.org",
                ssh_public_keys=[ed25519_key(name)],
            )
            create_user(session, settings, ACTOR, spec)
    with sessions.begin() as session:
        for g in range(groups):
            create_group(session, settings, ACTOR, GroupCreate(name=f"group{g:04d}", members=members[g]))


def entries_of(changes: Sequence[Change[AnyDetails]]) -> list[Entry]:
    """The (dn, attributes) of every create in a plan: what a raw load writes."""
    return [
        (c.details.dn, {k: values for k, v in c.details.attributes.items() if (values := values_of(v.new))})
        for c in changes
        if c.action == CREATE and isinstance(c.details, EntryWrite)
    ]


def rebase(entries: list[Entry], old: str, new: str) -> list[Entry]:
    def move(value: str) -> str:
        return value[: -len(old)] + new if value.endswith(old) else value

    return [(move(dn), {k: [move(v) for v in vs] for k, vs in attrs.items()}) for dn, attrs in entries]


def raw_async(url: str, entries: list[Entry], depth: int = 64) -> None:
    conn = Connection(Server(url), SERVICE_DN, SERVICE_PASSWORD, client_strategy=ASYNC, auto_bind=True)
    in_flight: deque[int] = deque()

    def collect() -> None:
        _, result = conn.get_response(in_flight.popleft(), timeout=60)
        assert result["result"] == 0, result

    for dn, attributes in entries:
        if len(in_flight) >= depth:
            collect()
        in_flight.append(conn.add(dn, attributes=attributes))  # type: ignore[no-untyped-call]
    while in_flight:
        collect()
    conn.unbind()


def raw_sync(url: str, entries: list[Entry]) -> None:
    conn = Connection(Server(url), SERVICE_DN, SERVICE_PASSWORD, client_strategy=SAFE_SYNC, auto_bind=True)
    for dn, attributes in entries:
        _, result, _, _ = conn.add(dn, attributes=attributes)  # type: ignore[no-untyped-call]
        assert result["result"] == 0, result
    conn.unbind()


def sup_pass(
    settings: Settings, desired: DesiredState, scope: Scope | None = None
) -> tuple[list[LdapChange], int, int, int]:
    """One target pass: (changes, searches, writes, failures)."""
    target = LdapTarget(target_context(SPEC, settings))
    try:
        changes = target.diff(desired, target.observe(scope), scope)
        report = target.apply(changes) if changes else None
        failed = len(report.failed) if report else 0
        return changes, target.connection.searches, target.connection.writes, failed
    finally:
        target.close()


class Opener:
    """Opens the LDAP target for run_pass and keeps it, for its counts."""

    def __init__(self) -> None:
        self.target: LdapTarget | None = None

    def __call__(self, name: str, context: TargetContext[Any]) -> Target[Any, Any]:
        self.target = LdapTarget(context)
        return self.target


def scoped_pass(settings: Settings, sessions: sessionmaker[Session]) -> tuple[int, int, int]:
    """The reconciler's pass after writes: (changes, searches, writes)."""
    opener = Opener()
    result = run_pass(settings, sessions, apply=True, scoped=True, opener=opener)
    (ldap,) = [t for t in result.targets if t.target == "ldap"]
    assert ldap.scoped, "the pass was not scoped"
    assert ldap.state in (PassState.APPLIED, PassState.PLANNED), (ldap.state, ldap.error)
    assert opener.target is not None
    return len(ldap.changes), opener.target.connection.searches, opener.target.connection.writes


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--users", type=int, default=10000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--memberships", type=int, default=2, help="groups per user")
    parser.add_argument("--no-sequential", action="store_true", help="skip the pipeline_depth=1 pass")
    args = parser.parse_args(argv)

    slapd = SlapdServer("rfc2307bis").start()
    work = Path(tempfile.mkdtemp(prefix="sup-bench-"))
    results: dict[str, float] = {}
    counts: dict[str, Any] = {}
    try:
        bases = {name: slapd.new_base(name) for name in ("sup", "rawasync", "rawsync", "seq")}
        database_url = f"sqlite:///{work / 'sup.db'}"
        migrate.upgrade(database_url)

        def settings_for(base: str, **extra: Any) -> Settings:
            return Settings(database_url=database_url, ldap=slapd.ldap_settings(bases[base], **extra))

        settings = settings_for("sup")
        with timed(results, "fill the store (not compared)"):
            fill_store(settings, args.users, args.groups, args.memberships)
        with timed(results, "derive the desired state from the store"):
            desired = desired_state(make_sessionmaker(make_engine(database_url)), settings)
        counts["users"], counts["groups"] = len(desired.users), len(desired.groups)

        with timed(results, "SUP first pass (observe + diff + apply)"):
            changes, _, writes, failed = sup_pass(settings, desired)
        counts["first writes"], counts["first failures"] = writes, failed
        entries = entries_of(changes)
        counts["entries"] = len(entries)

        raw: list[tuple[str, str, Callable[[str, list[Entry]], None]]] = [
            ("raw ldap3 ASYNC load, 64 in flight", "rawasync", raw_async),
            ("raw ldap3 SAFE_SYNC load, one at a time", "rawsync", raw_sync),
        ]
        for label, base, load in raw:
            moved = rebase(entries, bases["sup"], bases[base])
            with timed(results, label):
                load(slapd.url, moved)

        with timed(results, "SUP no-change pass (observe + diff)"):
            again, searches, writes, _ = sup_pass(settings, desired)
        counts["no-change changes"], counts["no-change searches"], counts["no-change writes"] = (
            len(again),
            searches,
            writes,
        )
        sessions = make_sessionmaker(make_engine(database_url))
        with timed(results, "SUP no-change `run_pass` (store read included)"):
            whole = run_pass(settings, sessions, only=["ldap"], apply=True)
        assert whole.ok, [t.error for t in whole.targets]
        assert whole.changes == []
        with sessions.begin() as session:  # the store's fill left a mark per user and group
            outbox.clear(session, outbox.pending(session))
        with sessions.begin() as session:
            spec = UserCreate(username="newcomer", ssh_public_keys=[ed25519_key("new")], groups=["group0000"])
            create_user(session, settings, ACTOR, spec)
        with timed(
            results, "SUP scoped pass for one new user (`run_pass(scoped=True)`, store read included)"
        ):
            counts["scoped changes"], counts["scoped searches"], counts["scoped writes"] = scoped_pass(
                settings, sessions
            )
        desired = desired_state(sessions, settings)
        scope = Scope(frozenset({"newcomer"}), frozenset({"newcomer", "group0000"}))
        with timed(results, "SUP scoped pass for that user again (observe + diff; nothing to do)"):
            again, counts["target searches"], _, _ = sup_pass(settings, desired, scope)
        assert again == [], again
        with sessions.begin() as session:
            outbox.mark_dirty(session, "user", "newcomer")
        with timed(results, "the same scoped `run_pass` again (nothing to do: its reads alone)"):
            counts["settled changes"], counts["settled searches"], counts["settled writes"] = scoped_pass(
                settings, sessions
            )

        if not args.no_sequential:
            with timed(results, "SUP first pass, pipeline_depth=1"):
                _, _, writes, failed = sup_pass(settings_for("seq", pipeline_depth=1), desired)
            counts["sequential failures"] = failed
    finally:
        slapd.stop()
        shutil.rmtree(work, ignore_errors=True)

    first = results["SUP first pass (observe + diff + apply)"]
    raw_async_time = results["raw ldap3 ASYNC load, 64 in flight"]
    print(
        f"\n{counts['users']} users, {counts['groups']} groups (private ones included), "
        f"{counts['entries']} entries; Python {sys.version.split()[0]}\n"
    )
    print("| step | seconds | entries/s |")
    print("|---|---:|---:|")
    for name, seconds in results.items():
        rate = f"{counts['entries'] / seconds:,.0f}" if "load" in name or "first pass" in name else ""
        print(f"| {name} | {seconds:.2f} | {rate} |")
    print()
    print(f"- SUP first pass / raw ASYNC load: {first / raw_async_time:.2f}x (goal: within 1.5x)")
    sync_ratio = results["raw ldap3 SAFE_SYNC load, one at a time"] / raw_async_time
    print(f"- raw SAFE_SYNC / raw ASYNC: {sync_ratio:.2f}x")
    print(
        f"- no-change pass: {counts['no-change changes']} changes, {counts['no-change searches']} searches, "
        f"{counts['no-change writes']} writes (goal: under 2 s, O(pages) searches, zero writes)"
    )
    print(f"- scoped pass, observe + diff: {counts['target searches']} searches")
    for what in ("scoped", "settled"):
        print(
            f"- {what} pass: {counts[what + ' changes']} changes, {counts[what + ' searches']} searches, "
            f"{counts[what + ' writes']} writes"
        )
    print(f"- first pass: {counts['first writes']} writes, {counts['first failures']} failures")


if __name__ == "__main__":
    main()
