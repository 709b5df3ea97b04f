"""Check a whole import document against the rules and the store, and work out what it changes.

Nothing here writes. The result is a `Plan`: every problem (with its line or path), and for each
record whether it creates, updates (which fields, from what to what) or leaves an object unchanged,
plus the membership changes and, with `prune`, what the import no longer lists. The plan is computed
from the store as it is now, so running an import again (after it finished, or after it was killed
half-way) plans only what is still missing: that is what makes an import safe to re-run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy.orm import Session

from sup.config import Settings
from sup.domain.gids import private_gid_ranges, uid_ranges
from sup.domain.homes import HomeIndex, InvalidHome, check_home, home_root
from sup.domain.ownership import IMPORT_SOURCE, may_change, refusal
from sup.domain.posix import InvalidName, check_groupname
from sup.domain.privilege import refusal as refuse_privileged
from sup.domain.slurm import ROOT_ACCOUNT
from sup.domain.sshkeys import key_set_problem, parse_ssh_public_key
from sup.errors import InvalidInput
from sup.groups.privilege import privileged_among
from sup.groups.schemas import GroupCreate
from sup.slurm_accounts.schemas import SlurmAccountCreate
from sup.sources.files.current import ACCOUNT_FIELDS, Current, load_current
from sup.sources.files.document import Document, Kind, Problem, Record
from sup.ssh_ca.service import name_still_certified, names_on_live_certificates
from sup.store import ids
from sup.store.models import utcnow
from sup.users.schemas import UserCreate, UserPatch
from sup.users.service import check_username_policy, default_home

Action = Literal["create", "update", "unchanged", "suspend", "delete"]
# Fields a record may leave empty to mean "as it is" (they cannot be cleared: PATCH refuses null).
_KEEP_IF_EMPTY = UserPatch.required_fields


@dataclass
class Item:
    kind: Kind
    name: str
    action: Action
    where: str = ""
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # field -> (before, after)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "action": self.action,
            "where": self.where,
            "changes": {f: {"before": b, "after": a} for f, (b, a) in self.changes.items()},
        }


@dataclass
class Plan:
    problems: list[Problem]
    skipped: list[Problem]  # problems of records left out with --skip-invalid
    users: list[tuple[Item, Record[UserCreate]]] = field(default_factory=list)
    groups: list[tuple[Item, Record[GroupCreate]]] = field(default_factory=list)
    accounts: list[tuple[Item, Record[SlurmAccountCreate]]] = field(default_factory=list)
    add_members: set[tuple[str, str]] = field(default_factory=set)  # (group, username)
    remove_members: set[tuple[str, str]] = field(default_factory=set)
    prune: list[Item] = field(default_factory=list)
    active_users: int = 0  # in the store now (the prune guard's total)

    @property
    def items(self) -> list[Item]:
        return (
            [i for i, _ in self.groups]
            + [i for i, _ in self.accounts]
            + [i for i, _ in self.users]
            + self.prune
        )

    @property
    def writes(self) -> int:
        """How many store operations applying this plan takes (the progress bar's total)."""
        changing = [i for i in self.items if i.action != "unchanged"]
        return len(changing) + len(self.add_members) + len(self.remove_members)

    def counts(self) -> dict[str, dict[str, int]]:
        table: dict[str, dict[str, int]] = {}
        for kind in ("user", "group", "slurm_account"):
            row = dict.fromkeys(("created", "updated", "unchanged", "pruned", "skipped", "errors"), 0)
            for item in self.items:
                if item.kind == kind:
                    key = {"create": "created", "update": "updated", "unchanged": "unchanged"}.get(
                        item.action, "pruned"
                    )
                    row[key] += 1
            row["skipped"] = len({(p.where) for p in self.skipped if p.kind == kind})
            table[kind] = row
        return table


def make_plan(
    session: Session, settings: Settings, doc: Document, *, skip_invalid: bool = False, prune: bool = False
) -> Plan:
    """Validate `doc` against the rules and the store; with `skip_invalid`, leave out the records
    with problems (and those that then refer to them) and plan the rest."""
    current = load_current(session)
    problems = list(doc.problems)
    skipped: list[Problem] = []
    work = Document(users=list(doc.users), groups=list(doc.groups), accounts=list(doc.accounts))
    while True:
        plan = Plan(problems=[], skipped=[])
        found = _check(session, settings, work, current)
        if not found:
            _diff(plan, settings, work, current)
            found = _ownership(plan, current, settings) + _privileged(session, plan, work, settings)
        if not found or not skip_invalid:
            problems += found
            break
        bad = {p.where for p in found}
        skipped += found
        work.users = [r for r in work.users if r.where not in bad]
        work.groups = [r for r in work.groups if r.where not in bad]
        work.accounts = [r for r in work.accounts if r.where not in bad]
    if skip_invalid:
        skipped = [p for p in problems if p.kind is not None] + skipped
        problems = [p for p in problems if p.kind is None]
    plan.problems, plan.skipped = problems, skipped
    plan.active_users = sum(1 for u in current.users.values() if u.values["active"])
    if problems:
        return Plan(problems=problems, skipped=skipped)
    if prune:
        _prune(plan, work, current)
    return plan


# --- checks ------------------------------------------------------------------------------------------


def _duplicates(records: Iterable[Record[Any]], key: str, kind: Kind, what: str) -> list[Problem]:
    first: dict[Any, str] = {}
    found = []
    for record in records:
        value = getattr(record.spec, key)
        if value is None:
            continue
        if value in first:
            found.append(
                Problem(
                    record.where,
                    f"duplicate {what} {value!r} (also at {first[value]})",
                    field=key,
                    kind=kind,
                    name=_name(record),
                )
            )
        else:
            first[value] = record.where
    return found


def _name(record: Record[Any]) -> str:
    return str(getattr(record.spec, "username", None) or getattr(record.spec, "name", ""))


def _check(session: Session, settings: Settings, doc: Document, current: Current) -> list[Problem]:
    found: list[Problem] = []
    found += _duplicates(doc.users, "username", "user", "username")
    found += _duplicates(doc.users, "uid_number", "user", "uid_number")
    found += _duplicates(doc.groups, "name", "group", "group name")
    found += _duplicates(doc.groups, "gid_number", "group", "gid_number")
    found += _duplicates(doc.accounts, "name", "slurm_account", "account name")
    found += _check_users(session, settings, doc, current)
    found += _check_homes(settings, doc, current)
    found += _check_groups(session, settings, doc, current)
    found += _check_accounts(doc, current)
    return found


def _problem(record: Record[Any], kind: Kind, message: str, field: str | None = None) -> Problem:
    return Problem(record.where, message, field=field, kind=kind, name=_name(record))


def _check_users(session: Session, settings: Settings, doc: Document, current: Current) -> list[Problem]:
    found: list[Problem] = []
    file_groups = {r.spec.name for r in doc.groups}
    file_accounts = {r.spec.name for r in doc.accounts}
    accepted_uids = uid_ranges(settings.ids)
    supplied_uids = {
        r.spec.uid_number
        for r in doc.users
        if r.spec.uid_number is not None
        and (
            r.spec.username not in current.users
            or current.users[r.spec.username].values["uid_number"] != r.spec.uid_number
        )
    }
    uids_taken = ids.taken(session, "uid", supplied_uids)
    gids_taken = ids.taken(
        session,
        "gid",
        (
            r.spec.primary_gid
            for r in doc.users
            if r.spec.primary_gid is not None and r.spec.username not in current.users
        ),
    )
    uid_owner = {u.values["uid_number"]: name for name, u in current.users.items()}
    certified = names_on_live_certificates(
        session, [r.spec.username for r in doc.users if r.spec.username not in current.users], utcnow()
    )
    key_seen: dict[str, str] = {}
    for record in doc.users:
        spec, name = record.spec, record.spec.username
        existing = current.users.get(name)

        def add(message: str, field: str | None = None, record: Record[Any] = record) -> None:
            found.append(_problem(record, "user", message, field))

        try:
            check_username_policy(settings, name)
        except InvalidInput as exc:
            add(exc.errors[0].message, "username")
        if existing is None and name in certified:
            add(name_still_certified(name, certified[name]), "username")
        if existing is None and settings.ids.private_groups:
            if name in current.groups:
                add(f"a group named {name!r} exists; the user's private group needs that name", "username")
            elif name in file_groups:
                add(
                    f"the file also has a group named {name!r}; the user's private group needs that name",
                    "username",
                )
        if spec.uid_number is not None and spec.uid_number in supplied_uids:
            if not any(spec.uid_number in r for r in accepted_uids):
                ranges = ", ".join(str(r) for r in accepted_uids)
                add(f"{spec.uid_number} is outside the allowed ranges ({ranges})", "uid_number")
            elif spec.uid_number in uids_taken:
                holder = uid_owner.get(spec.uid_number)
                said = (
                    f"is in use by user {holder!r}" if holder else "was allocated before and is never reused"
                )
                add(f"{spec.uid_number} {said}", "uid_number")
        if spec.primary_gid is not None and existing is None and settings.ids.private_groups:
            if not any(spec.primary_gid in r for r in private_gid_ranges(settings.ids)):
                add(f"{spec.primary_gid} is outside the allowed ranges", "primary_gid")
            elif spec.primary_gid in gids_taken:
                add(f"gid {spec.primary_gid} is already allocated (gids are never reused)", "primary_gid")
        shell = spec.login_shell
        if record.has("login_shell") and shell is not None and shell not in settings.accounts.allowed_shells:
            add(f"{spec.login_shell} is not an allowed shell", "login_shell")
        for index, group in enumerate(spec.groups):
            stored = current.groups.get(group)
            if stored is not None and stored.private:
                add(f"{group!r} is a user's private group; it has no members", f"groups.{index}")
            elif stored is None and group not in file_groups:
                add(f"unknown group {group!r} (not in the store and not in the file)", f"groups.{index}")
        account = spec.slurm_default_account
        if account is not None and account not in current.accounts and account not in file_accounts:
            add(f"there is no Slurm account {account!r}", "slurm_default_account")
        found.extend(_check_keys(settings, record, current, key_seen))
    return found


def _check_homes(settings: Settings, doc: Document, current: Current) -> list[Problem]:
    """The homes the file sets (and new users' default homes), as the users service checks them:
    safe, below the home root, one user's each, none above or below another user's (sup/users/homes.py):
    against the store and the records before, in O(depth) a home (sup/domain/homes.py, HomeIndex)."""
    found: list[Problem] = []
    root = home_root(settings.accounts.home_template)
    held = HomeIndex((name, u.values["home_directory"]) for name, u in current.users.items())
    for record in doc.users:
        name, stored = record.spec.username, current.users.get(record.spec.username)
        home = record.spec.home_directory if record.has("home_directory") else None
        if home is None and stored is None:
            home = default_home(settings, name)
        if home is None or (stored is not None and stored.values["home_directory"] == home):
            continue
        try:
            check_home(home, root)
        except InvalidHome as exc:
            found.append(_problem(record, "user", f"{home[:80]!r} {exc}", "home_directory"))
            continue
        clash = held.clash(home, exclude=name)
        if clash is not None:
            found.append(_problem(record, "user", clash.message(), "home_directory"))
            continue
        held.add(name, home)
    return found


def _check_keys(
    settings: Settings, record: Record[UserCreate], current: Current, key_seen: dict[str, str]
) -> list[Problem]:
    found: list[Problem] = []
    name = record.spec.username
    lines = record.spec.ssh_public_keys
    accounts = settings.accounts
    problem = key_set_problem(
        [parse_ssh_public_key(line).line for line in lines], accounts.max_ssh_keys, accounts.max_ssh_key_bytes
    )
    if problem is not None:
        found.append(_problem(record, "user", problem, "ssh_public_keys"))
    mine: set[str] = set()
    for index, line in enumerate(lines):
        fingerprint = parse_ssh_public_key(line).fingerprint  # the schema already validated it
        field_ = f"ssh_public_keys.{index}"
        owner = current.key_owners.get(fingerprint)
        if fingerprint in mine:
            found.append(_problem(record, "user", "the same key is listed twice", field_))
        elif owner is not None and owner != name:
            found.append(_problem(record, "user", f"key {fingerprint} belongs to user {owner!r}", field_))
        elif fingerprint in key_seen and key_seen[fingerprint] != record.where:
            found.append(
                _problem(
                    record, "user", f"key {fingerprint} is also given at {key_seen[fingerprint]}", field_
                )
            )
        mine.add(fingerprint)
        key_seen.setdefault(fingerprint, record.where)
    return found


def _check_groups(session: Session, settings: Settings, doc: Document, current: Current) -> list[Problem]:
    found: list[Problem] = []
    file_users = {r.spec.username for r in doc.users}
    ranges = [settings.ids.gid_range, *settings.ids.supplied_gid_ranges]
    supplied = {
        r.spec.gid_number
        for r in doc.groups
        if r.spec.gid_number is not None
        and (
            r.spec.name not in current.groups
            or current.groups[r.spec.name].values["gid_number"] != r.spec.gid_number
        )
    }
    gids_taken = ids.taken(session, "gid", supplied)
    for record in doc.groups:
        spec, name = record.spec, record.spec.name
        existing = current.groups.get(name)

        def add(message: str, field: str | None = None, record: Record[Any] = record) -> None:
            found.append(_problem(record, "group", message, field))

        try:
            check_groupname(name, settings.reserved_names())
        except InvalidName as exc:
            add(str(exc), "name")
        if existing is not None and existing.private:
            add(f"{name!r} is a user's private group; it follows the user", "name")
        if existing is None and settings.ids.private_groups and (name in current.users or name in file_users):
            add(f"{name!r} is a user's name, and so the name of their private group", "name")
        if spec.gid_number is not None and spec.gid_number in supplied:
            if not any(spec.gid_number in r for r in ranges):
                add(f"{spec.gid_number} is outside the allowed ranges", "gid_number")
            elif spec.gid_number in gids_taken:
                add(f"{spec.gid_number} is already allocated (gids are never reused)", "gid_number")
        for index, member in enumerate(spec.members):
            if member not in current.users and member not in file_users:
                add(f"unknown user {member!r}", f"members.{index}")
    return found


def _check_accounts(doc: Document, current: Current) -> list[Problem]:
    found: list[Problem] = []
    file_groups = {r.spec.name for r in doc.groups}
    parents = {name: a["parent"] for name, a in current.accounts.items()}
    parents.update({r.spec.name: r.spec.parent for r in doc.accounts})
    for record in doc.accounts:
        spec = record.spec
        for field_ in ("group", "coordinators"):
            group = getattr(spec, field_)
            if group is not None and group not in current.groups and group not in file_groups:
                found.append(_problem(record, "slurm_account", f"unknown group {group!r}", field_))
        if spec.parent != ROOT_ACCOUNT and spec.parent not in parents:
            found.append(
                _problem(record, "slurm_account", f"unknown parent account {spec.parent!r}", "parent")
            )
            continue
        seen, node = {spec.name}, spec.parent
        while node != ROOT_ACCOUNT and node in parents:
            if node in seen:
                found.append(_problem(record, "slurm_account", "the parents form a cycle", "parent"))
                break
            seen.add(node)
            node = parents[node]
    return found


# --- diff --------------------------------------------------------------------------------------------


def user_values(record: Record[UserCreate]) -> dict[str, Any]:
    """The fields this record sets (without username and groups), as the store would hold them."""
    values = record.spec.model_dump(include=set(record.fields) - {"username", "groups"})
    return {k: v for k, v in values.items() if not (v is None and k in _KEEP_IF_EMPTY)}


def _changes(wanted: dict[str, Any], stored: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    changes = {}
    for key, value in wanted.items():
        before = stored.get(key)
        if key in ("ssh_public_keys", "qos", "partitions"):
            same = sorted(before or []) == sorted(value or [])
        else:
            same = before == value
        if not same:
            changes[key] = (before, value)
    return changes


def _diff(plan: Plan, settings: Settings, doc: Document, current: Current) -> None:
    for group_record in doc.groups:
        name = group_record.spec.name
        wanted = group_record.spec.model_dump(include=set(group_record.fields) - {"name", "members"})
        stored_group = current.groups.get(name)
        if stored_group is None:
            plan.groups.append((Item("group", name, "create", group_record.where), group_record))
        else:
            changes = _changes(wanted, stored_group.values)
            action: Action = "update" if changes else "unchanged"
            plan.groups.append((Item("group", name, action, group_record.where, changes), group_record))

    for account_record in doc.accounts:
        name = account_record.spec.name
        wanted = account_record.spec.model_dump(include=set(account_record.fields) & set(ACCOUNT_FIELDS))
        wanted.pop("name", None)
        if "limits" in wanted:
            wanted["limits"] = account_record.spec.limits.model_dump(exclude_none=True)
        stored_account = current.accounts.get(name)
        if stored_account is None:
            plan.accounts.append(
                (Item("slurm_account", name, "create", account_record.where), account_record)
            )
        else:
            changes = _changes(wanted, stored_account)
            action = "update" if changes else "unchanged"
            plan.accounts.append(
                (Item("slurm_account", name, action, account_record.where, changes), account_record)
            )

    for user_record in doc.users:
        name = user_record.spec.username
        stored_user = current.users.get(name)
        if stored_user is None:
            plan.users.append((Item("user", name, "create", user_record.where), user_record))
        else:
            changes = _changes(user_values(user_record), stored_user.values)
            action = "update" if changes else "unchanged"
            plan.users.append((Item("user", name, action, user_record.where, changes), user_record))

    _memberships(plan, doc, current)


def _memberships(plan: Plan, doc: Document, current: Current) -> None:
    """Pairs (group, user) the file speaks about: those of a user record with `groups` and those of a
    group record with `members`. Within that scope the store is made to match the file."""
    wanted: set[tuple[str, str]] = set()
    have: set[tuple[str, str]] = set()
    for record in doc.users:
        if record.has("groups"):
            name = record.spec.username
            wanted |= {(g, name) for g in record.spec.groups}
            stored = current.users.get(name)
            have |= {(g, name) for g in (stored.groups if stored else ())}
    for group_record in doc.groups:
        if group_record.has("members"):
            name = group_record.spec.name
            wanted |= {(name, u) for u in group_record.spec.members}
            stored_group = current.groups.get(name)
            have |= {(name, u) for u in (stored_group.members if stored_group else ())}
    plan.add_members = wanted - have
    plan.remove_members = have - wanted
    changed_users = Counter(u for _, u in plan.add_members | plan.remove_members)
    changed_groups = Counter(g for g, _ in plan.add_members | plan.remove_members)
    for item, _ in plan.users:
        if item.action == "unchanged" and item.name in changed_users:
            item.action = "update"
        if item.action == "update" and item.name in changed_users:
            item.changes["groups"] = _member_change(plan, item.name, by_user=True)
    for item, group_record in plan.groups:
        if group_record.has("members") and item.name in changed_groups:
            if item.action == "unchanged":
                item.action = "update"
            if item.action == "update":
                item.changes["members"] = _member_change(plan, item.name, by_user=False)


def _member_change(plan: Plan, name: str, *, by_user: bool) -> tuple[Any, Any]:
    index, other = (1, 0) if by_user else (0, 1)
    removed = sorted(p[other] for p in plan.remove_members if p[index] == name)
    added = sorted(p[other] for p in plan.add_members if p[index] == name)
    return ({"remove": removed} if removed else {}, {"add": added} if added else {})


def _privileged(session: Session, plan: Plan, doc: Document, settings: Settings) -> list[Problem]:
    """Privileged groups (admin and coordinator groups) an import may not create or fill unless
    sources.privileged_group_writers lists `import` (sup/groups/privilege.py)."""
    if settings.sources.may_write_privileged(IMPORT_SOURCE):
        return []
    names = {i.name for i, _ in plan.groups} | {g for g, _ in plan.add_members}
    privileged = set(privileged_among(session, settings, names))
    privileged |= {r.spec.coordinators for r in doc.accounts if r.spec.coordinators}
    found = []
    for item, group_record in plan.groups:
        if item.action == "create" and item.name in privileged:
            found.append(
                _problem(group_record, "group", refuse_privileged(item.name, IMPORT_SOURCE, "create"))
            )
    filled = {g for g, _ in plan.add_members if g in privileged}
    for item, user_record in plan.users:
        joins = sorted(g for g, u in plan.add_members if u == item.name and g in filled)
        if joins:
            message = refuse_privileged(joins[0], IMPORT_SOURCE, "add members to")
            found.append(_problem(user_record, "user", message, "groups"))
    for item, group_record in plan.groups:
        if item.name in filled and group_record.has("members") and item.action != "create":
            found.append(
                _problem(
                    group_record,
                    "group",
                    refuse_privileged(item.name, IMPORT_SOURCE, "add members to"),
                    "members",
                )
            )
    return found


def _ownership(plan: Plan, current: Current, settings: Settings) -> list[Problem]:
    policy = settings.sources.precedence
    found = []
    for item, record in plan.users:
        stored = current.users.get(item.name)
        if item.action == "update" and stored is not None and not may_change(stored.source, policy):
            found.append(_problem(record, "user", refusal("user", item.name, stored.source)))
    for item, group_record in plan.groups:
        stored_group = current.groups.get(item.name)
        if (
            item.action == "update"
            and stored_group is not None
            and not may_change(stored_group.source, policy)
        ):
            found.append(_problem(group_record, "group", refusal("group", item.name, stored_group.source)))
    return found


def _prune(plan: Plan, doc: Document, current: Current) -> None:
    """What the import created earlier and the file no longer lists: users are suspended (the
    lifecycle deletes them after lifecycle.delete_after_days), ordinary groups deleted."""
    listed_users = {r.spec.username for r in doc.users}
    # A group the file still uses (a user joins it, an account is bound to it) is not pruned.
    listed_groups = {r.spec.name for r in doc.groups} | {g for r in doc.users for g in r.spec.groups}
    listed_groups |= {n for r in doc.accounts for n in (r.spec.group, r.spec.coordinators) if n}
    for name, user in sorted(current.users.items()):
        if name not in listed_users and may_change(user.source) and user.values["active"]:
            plan.prune.append(Item("user", name, "suspend", changes={"active": (True, False)}))
    for name, group in sorted(current.groups.items()):
        if name not in listed_groups and not group.private and may_change(group.source):
            plan.prune.append(Item("group", name, "delete"))
