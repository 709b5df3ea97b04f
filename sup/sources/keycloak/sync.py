"""Applying what was read from Keycloak to the store, through the users and groups services.

The rules:
- A Keycloak user is a store user with source `keycloak` and external_id = Keycloak's user id; the
  POSIX username is derived from the Keycloak username by the `naming` rules. Email, first and last
  name, `enabled` and the configured attributes (SSH keys; uidNumber, gidNumber and loginShell when
  present) follow Keycloak. SSH keys from Keycloak have origin `idp` and replace only the user's other
  `idp` keys: keys the person or an administrator added stay.
- Disabled in Keycloak -> suspended (active=false). Gone from Keycloak -> suspended too, which starts
  the deletion lifecycle (deleted after lifecycle.delete_after_days unless the user comes back).
  Disabled users never provisioned are not created.
- A Keycloak group (at or below keycloak.groups_path) is a store group with source `keycloak`, named by
  keycloak.group_names; its members are exactly its direct members in Keycloak that SUP holds as
  Keycloak users. A group gone from Keycloak is deleted (unless bound to a Slurm account: reported).
- Ownership: a user or group whose name is held by another source is left alone and reported as a
  conflict, unless `sources.precedence` lets Keycloak take it over.
- Safety: a full read that would suspend more users than reconcile.max_suspensions (or the share
  max_suspension_share) of the active Keycloak users changes nothing unless forced: a realm that
  suddenly returns nobody (a wrong realm, an emptied database) does not suspend the cluster. (Forced,
  the reconciler's own guard still stops it reaching the targets.) The reader never hands over a
  partial read.
- Nothing that did not change is written: a pull without changes makes zero store writes.
Every change goes through the services, which validate, allocate ids, audit and mark the outbox.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from sup.config import KeycloakSettings, Settings
from sup.domain.guards import too_many_suspensions
from sup.domain.posix import InvalidName
from sup.domain.sshkeys import InvalidSshKey, parse_ssh_public_key
from sup.domain.usernames import derive_username
from sup.errors import SupError
from sup.groups import service as groups
from sup.groups.schemas import GroupCreate, GroupPatch
from sup.sources.keycloak.reader import KcGroup, KcUser, RealmSnapshot
from sup.store.audit import Actor
from sup.store.models import Group, Membership, User
from sup.users import service as users
from sup.users.schemas import UserCreate, UserPatch

log = logging.getLogger(__name__)

SOURCE = "keycloak"
ACTOR = Actor(name="source:keycloak", role="admin")


@dataclass
class SyncReport:
    mode: str = "full"
    users_read: int = 0
    groups_read: int = 0
    requests: int = 0
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    suspended: list[str] = field(default_factory=list)
    reactivated: list[str] = field(default_factory=list)
    groups_created: list[str] = field(default_factory=list)
    groups_updated: list[str] = field(default_factory=list)
    groups_deleted: list[str] = field(default_factory=list)
    members_added: int = 0
    members_removed: int = 0
    conflicts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    refused: str | None = None

    @property
    def writes(self) -> int:
        """Objects written (0 for a pull without changes)."""
        return (
            len(self.created) + len(self.updated) + len(self.groups_created) + len(self.groups_updated)
            + len(self.groups_deleted) + self.members_added + self.members_removed
        )  # fmt: skip

    @property
    def ok(self) -> bool:
        return self.refused is None and not self.errors

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "writes": self.writes, "ok": self.ok}


@dataclass(frozen=True)
class Scope:
    """What a (partial) read covers. None: everything (a full pull)."""

    users: frozenset[str] | None = None  # Keycloak user ids re-read; absent from the read = gone
    groups_complete: bool = True  # the whole group tree was read: a group absent from it is gone
    member_groups: frozenset[str] | None = None  # groups whose member list was read in full
    user_groups: dict[str, set[str]] | None = None  # user id -> every group id it is in (events)

    @property
    def full(self) -> bool:
        return self.users is None


# --- naming -----------------------------------------------------------------------------------------


def username_of(settings: Settings, kc: KcUser) -> str:
    return derive_username(kc.username, settings.naming)


def group_name_of(settings: Settings, group: KcGroup) -> str:
    kc = _kc(settings)
    if kc.group_names == "name":
        text = group.name
    else:
        root = kc.groups_path
        rest = group.path if root == "/" else group.path[len(root) :]
        parts = [p for p in rest.split("/") if p] or [group.name]
        text = kc.path_separator.join(parts)
    return derive_username(text, settings.naming.model_copy(update={"strategy": "full"}), overlong="hash")


def _kc(settings: Settings) -> KeycloakSettings:
    if settings.keycloak is None:
        raise RuntimeError("the Keycloak source is not configured")
    return settings.keycloak


# --- what a Keycloak user should look like in the store ----------------------------------------------


def _single(kc: KcUser, name: str) -> str | None:
    values = [v for v in kc.attributes.get(name, []) if v.strip()]
    return values[0].strip() if values else None


def _number(kc: KcUser, name: str, report: SyncReport, who: str) -> int | None:
    raw = _single(kc, name)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        report.errors.append(f"{who}: attribute {name}={raw!r} is not a number; ignored")
        return None


def _keys(settings: Settings, kc: KcUser, report: SyncReport, who: str) -> dict[str, str]:
    """fingerprint -> line of the user's valid keys (invalid ones are reported and left out)."""
    found: dict[str, str] = {}
    for line in kc.attributes.get(_kc(settings).ssh_key_attribute, []):
        if not line.strip():
            continue
        try:
            key = parse_ssh_public_key(line)
        except InvalidSshKey as exc:
            report.errors.append(f"{who}: an SSH key in Keycloak is not valid ({exc}); left out")
            continue
        found.setdefault(key.fingerprint, line.strip())
    return found


def _display(kc: KcUser) -> str | None:
    name = " ".join(p for p in (kc.first_name, kc.last_name) if p)
    return name or None


def _wanted(settings: Settings, kc: KcUser, report: SyncReport, who: str) -> dict[str, Any]:
    kcs = _kc(settings)
    wanted: dict[str, Any] = {
        "email": kc.email,
        "given_name": kc.first_name,
        "family_name": kc.last_name,
        "display_name": _display(kc),
        "active": kc.enabled,
    }
    shell = _single(kc, kcs.shell_attribute)
    if shell is not None:
        wanted["login_shell"] = shell
    uid = _number(kc, kcs.uid_attribute, report, who)
    if uid is not None:
        wanted["uid_number"] = uid
    gid = _number(kc, kcs.gid_attribute, report, who)
    if gid is not None:
        wanted["primary_gid"] = gid
    return wanted


def _user_patch(settings: Settings, user: User, kc: KcUser, report: SyncReport) -> dict[str, Any]:
    """The fields of `user` that differ from Keycloak (empty: nothing to write)."""
    patch = {k: v for k, v in _wanted(settings, kc, report, user.username).items() if getattr(user, k) != v}
    username = username_of(settings, kc)
    if username != user.username:
        patch["username"] = username
    keys = _keys(settings, kc, report, user.username)
    mine = {k.fingerprint: k.line for k in user.ssh_keys if k.origin == "idp"}
    others = {k.fingerprint for k in user.ssh_keys if k.origin != "idp"}
    if {f: keys[f] for f in keys if f not in others} != mine:
        patch["ssh_public_keys"] = list(keys.values())
    return patch


# --- applying -------------------------------------------------------------------------------------------


class _Store:
    """The store's users and groups, loaded once per sync."""

    def __init__(self, session: Session) -> None:
        all_users = session.scalars(
            select(User).options(
                selectinload(User.ssh_keys), selectinload(User.memberships).selectinload(Membership.group)
            )
        ).all()
        self.user_by_name = {u.username: u for u in all_users}
        self.user_by_kc = {u.external_id: u for u in all_users if u.source == SOURCE and u.external_id}
        all_groups = session.scalars(select(Group).options(selectinload(Group.memberships))).all()
        self.group_by_name = {g.name: g for g in all_groups}
        self.group_by_kc = {g.external_id: g for g in all_groups if g.source == SOURCE and g.external_id}


def apply(
    session: Session,
    settings: Settings,
    snapshot: RealmSnapshot,
    *,
    scope: Scope | None = None,
    force: bool = False,
    mode: str = "full",
) -> SyncReport:
    """Make the store agree with `snapshot` (within `scope`). Returns what was done."""
    scope = scope or Scope()
    report = SyncReport(
        mode=mode,
        users_read=len(snapshot.users),
        groups_read=len(snapshot.groups),
        requests=snapshot.requests,
    )
    store = _Store(session)

    leaving = _leaving(store, snapshot, scope)
    active = sum(1 for u in store.user_by_kc.values() if u.active)
    if not force and too_many_suspensions(len(leaving), active, settings.reconcile):
        report.refused = (
            f"Keycloak's answer would suspend {len(leaving)} of the {active} active Keycloak users "
            f"({', '.join(sorted(leaving)[:5])}{', ...' if len(leaving) > 5 else ''}), over "
            f"reconcile.max_suspensions={settings.reconcile.max_suspensions} or max_suspension_share="
            f"{settings.reconcile.max_suspension_share:g}; nothing was changed. Check the realm, then "
            "run `sup sync keycloak --force` if it is right"
        )
        log.warning("keycloak sync refused: %s", report.refused)
        return report

    for kc in sorted(snapshot.users.values(), key=lambda u: u.username):
        _guarded(
            session,
            report,
            f"user {kc.username!r}",
            lambda kc=kc: _sync_user(session, settings, store, kc, report),
        )
    if scope.users is None:
        gone_ids = set(store.user_by_kc) - set(snapshot.users)
    else:
        gone_ids = {i for i in scope.users if i not in snapshot.users and i in store.user_by_kc}
    for kc_id in sorted(gone_ids):
        user = store.user_by_kc[kc_id]
        if user.active:
            _guarded(
                session,
                report,
                f"user {user.username!r}",
                lambda u=user: _suspend_gone(session, settings, u, report),
            )

    group_ids = _sync_groups(session, settings, store, snapshot, scope, report)
    _sync_members(session, settings, store, snapshot, scope, group_ids, report)
    for conflict in report.conflicts:
        log.warning("keycloak sync conflict: %s", conflict)
    return report


def _leaving(store: _Store, snapshot: RealmSnapshot, scope: Scope) -> set[str]:
    """Usernames of active Keycloak users this sync would suspend (disabled or gone)."""
    leaving = set()
    for kc_id, user in store.user_by_kc.items():
        if not user.active:
            continue
        if scope.users is not None and kc_id not in scope.users:
            continue
        kc = snapshot.users.get(kc_id)
        if kc is None or not kc.enabled:
            leaving.add(user.username)
    return leaving


def _guarded(session: Session, report: SyncReport, what: str, action: Any) -> None:
    """Run one object's change in a savepoint: a refused change is reported, the others go on."""
    try:
        with session.begin_nested():
            action()
    except (SupError, ValidationError, InvalidName) as exc:
        message = exc.message if isinstance(exc, SupError) else _validation_text(exc)
        report.errors.append(f"{what}: {message}")
        log.warning("keycloak sync: %s: %s", what, message)


def _validation_text(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_input=False)
        )
    return str(exc)


def _sync_user(session: Session, settings: Settings, store: _Store, kc: KcUser, report: SyncReport) -> None:
    user = store.user_by_kc.get(kc.id)
    if user is None:
        username = username_of(settings, kc)
        holder = store.user_by_name.get(username)
        if holder is not None:
            if holder.source == SOURCE:
                report.conflicts.append(
                    f"Keycloak user {kc.username!r} gives username {username!r}, which another Keycloak "
                    f"user (id {holder.external_id}) already has; {kc.username!r} is not provisioned"
                )
                return
            if not settings.sources.may_take_over(SOURCE, holder.source):
                report.conflicts.append(
                    f"user {username!r} (Keycloak {kc.username!r}) is owned by source {holder.source!r}; "
                    "left as it is (sources.precedence does not let keycloak take it over)"
                )
                return
            _take_over(session, holder, kc.id, "user")
            store.user_by_kc[kc.id] = holder
            user = holder
        else:
            if not kc.enabled:
                return  # never provisioned, and disabled: nothing to do
            _create_user(session, settings, store, kc, username, report)
            return
    patch = _user_patch(settings, user, kc, report)
    if not patch:
        return
    old_name = user.username
    was_active = user.active
    gid = patch.pop("primary_gid", None) if user.private_group is not None else None
    if gid is not None:  # with private groups, gidNumber is the private group's gid
        groups.update_group(session, settings, ACTOR, user.username, GroupPatch(gid_number=gid))
    if not patch:
        report.updated.append(user.username)
        return
    users.update_user(
        session,
        settings,
        ACTOR,
        user.username,
        UserPatch(**patch),
        key_origin="idp",
        keys_of_origin_only=True,
    )
    if old_name != user.username:
        store.user_by_name.pop(old_name, None)
        store.user_by_name[user.username] = user
    if was_active and not user.active:
        report.suspended.append(user.username)
    elif not was_active and user.active:
        report.reactivated.append(user.username)
    else:
        report.updated.append(user.username)


def _create_user(
    session: Session, settings: Settings, store: _Store, kc: KcUser, username: str, report: SyncReport
) -> None:
    wanted = _wanted(settings, kc, report, username)
    spec = UserCreate(
        username=username,
        external_id=kc.id,
        ssh_public_keys=list(_keys(settings, kc, report, username).values()),
        **wanted,
    )
    user = users.create_user(session, settings, ACTOR, spec, source=SOURCE, key_origin="idp")
    store.user_by_name[username] = user
    store.user_by_kc[kc.id] = user
    report.created.append(username)


def _suspend_gone(session: Session, settings: Settings, user: User, report: SyncReport) -> None:
    users.update_user(session, settings, ACTOR, user.username, UserPatch(active=False))
    report.suspended.append(user.username)
    log.info("user %s is gone from Keycloak: suspended (the deletion lifecycle starts)", user.username)


def _take_over(session: Session, obj: User | Group, kc_id: str, kind: str) -> None:
    from sup.store.audit import record

    before = {"source": obj.source, "external_id": obj.external_id}
    obj.source = SOURCE
    obj.external_id = kc_id
    session.flush()
    record(session, ACTOR, "take_over", kind, obj.name if isinstance(obj, Group) else obj.username,
           before=before, after={"source": SOURCE, "external_id": kc_id})  # fmt: skip


# --- groups and members ---------------------------------------------------------------------------------


def _sync_groups(
    session: Session,
    settings: Settings,
    store: _Store,
    snapshot: RealmSnapshot,
    scope: Scope,
    report: SyncReport,
) -> dict[str, Group]:
    """Create, rename and delete Keycloak groups. Returns Keycloak group id -> store group."""
    mapped: dict[str, Group] = {}
    for kc in sorted(snapshot.groups.values(), key=lambda g: g.path):

        def one(kc: KcGroup = kc) -> None:
            group = _sync_group(session, settings, store, kc, report)
            if group is not None:
                mapped[kc.id] = group

        _guarded(session, report, f"group {kc.path!r}", one)
    gone = set(store.group_by_kc) - set(snapshot.groups) if scope.groups_complete else set()
    for kc_id in sorted(gone):
        group = store.group_by_kc[kc_id]

        def drop(group: Group = group) -> None:
            name = group.name
            groups.delete_group(session, settings, ACTOR, name)
            store.group_by_name.pop(name, None)
            report.groups_deleted.append(name)

        _guarded(session, report, f"group {group.name!r}", drop)
    for kc_id, group in store.group_by_kc.items():
        if kc_id not in mapped and kc_id not in gone:
            mapped[kc_id] = group
    return mapped


def _sync_group(
    session: Session, settings: Settings, store: _Store, kc: KcGroup, report: SyncReport
) -> Group | None:
    name = group_name_of(settings, kc)
    description = f"Keycloak group {kc.path}"[:1024]
    group = store.group_by_kc.get(kc.id)
    if group is None:
        holder = store.group_by_name.get(name)
        if holder is not None:
            if holder.source == SOURCE or holder.private_user_id is not None:
                whose = (
                    "a user's private group"
                    if holder.private_user_id is not None
                    else "another Keycloak group"
                )
                report.conflicts.append(
                    f"Keycloak group {kc.path!r} gives name {name!r}, already {whose}; skipped"
                )
                return None
            if not settings.sources.may_take_over(SOURCE, holder.source):
                report.conflicts.append(
                    f"group {name!r} (Keycloak {kc.path!r}) is owned by source {holder.source!r}; left as it "
                    "is (sources.precedence does not let keycloak take it over)"
                )
                return None
            _take_over(session, holder, kc.id, "group")
            store.group_by_kc[kc.id] = holder
            group = holder
        else:
            group = groups.create_group(
                session,
                settings,
                ACTOR,
                GroupCreate(name=name, description=description, external_id=kc.id),
                SOURCE,
            )
            store.group_by_name[name] = group
            store.group_by_kc[kc.id] = group
            report.groups_created.append(name)
            return group
    patch: dict[str, Any] = {}
    if group.name != name:
        patch["name"] = name
    if group.description != description:
        patch["description"] = description
    if patch:
        old = group.name
        groups.update_group(session, settings, ACTOR, group.name, GroupPatch(**patch))
        store.group_by_name.pop(old, None)
        store.group_by_name[group.name] = group
        report.groups_updated.append(group.name)
    return group


def _sync_members(
    session: Session,
    settings: Settings,
    store: _Store,
    snapshot: RealmSnapshot,
    scope: Scope,
    mapped: dict[str, Group],
    report: SyncReport,
) -> None:
    store_id = {kc_id: u.id for kc_id, u in store.user_by_kc.items()}
    by_id = {u.id: u for u in store.user_by_kc.values()}
    wanted: dict[str, set[int]] = {}
    checked: dict[str, set[int] | None] = {}  # group -> the users whose membership was read (None: all)
    groups_read = snapshot.members if scope.member_groups is None else {
        g: m for g, m in snapshot.members.items() if g in scope.member_groups
    }  # fmt: skip
    for kc_gid, kc_members in groups_read.items():
        wanted[kc_gid] = {store_id[m] for m in kc_members if m in store_id}
        checked[kc_gid] = None
    for kc_uid, kc_gids in (scope.user_groups or {}).items():
        if kc_uid not in store_id:
            continue
        for kc_gid in mapped:
            if checked.get(kc_gid, set()) is None:
                continue  # its whole member list was read
            if kc_gid in kc_gids:
                wanted.setdefault(kc_gid, set()).add(store_id[kc_uid])
            checked.setdefault(kc_gid, set()).add(store_id[kc_uid])  # type: ignore[union-attr]
    for kc_gid in set(wanted) | set(checked):
        group = mapped.get(kc_gid)
        if group is None or group.source != SOURCE:
            continue
        members = wanted.get(kc_gid, set())
        current = {m.user_id for m in group.memberships}
        within = checked.get(kc_gid)
        add = members - current
        remove = {u for u in current - members if within is None or u in within}
        _apply_members(session, settings, group, add, remove, by_id, report)


def _apply_members(
    session: Session,
    settings: Settings,
    group: Group,
    add: set[int],
    remove: set[int],
    by_id: dict[int, User],
    report: SyncReport,
) -> None:
    """One member-list change per group (one audit entry and version bump, however many members)."""
    if not add and not remove:
        return
    names = {m.user.username for m in group.memberships if m.user_id not in remove}
    names |= {by_id[u].username for u in add if u in by_id}

    def change() -> None:
        groups.update_group(session, settings, ACTOR, group.name, GroupPatch(members=sorted(names)))
        report.members_added += len(add)
        report.members_removed += len(remove)

    _guarded(session, report, f"members of {group.name!r}", change)
