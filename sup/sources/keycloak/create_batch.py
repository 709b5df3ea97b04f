"""New Keycloak users in batches, through the users service's batched create (sup/users/bulk.py).

A first pull creates thousands of users; one `save_user` each costs a dozen statements (id
allocation, private group, keys, outbox marks, audit). The batched create writes the same rows, the
same uids and gids (allocated in the same order: by Keycloak username), one audit `create` entry
and one outbox mark per user and private group, in a few multi-row statements.

Users are created in the pull's order (by Keycloak username), a batch ending wherever the pull
writes anything else, so uids and gids come out exactly as one by one. Only the plain case is
batched: an enabled user new to SUP whose name nobody holds or wants, without uidNumber/gidNumber
attributes, with a valid spec, an allowed shell and keys nobody else has. Every other user (a name
held by another source or another Keycloak user, a rule broken, ids given by Keycloak, a key another
Keycloak user has too) is left to the per-user path (write_users.sync_user), which reports it as it
always has.

Should the batch still be refused (a rule the checks here do not repeat), its savepoint is rolled
back and its users go the per-user way too: the batch changes speed, not outcomes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from sup.config import Settings
from sup.domain.posix import InvalidName
from sup.domain.sshkeys import key_set_problem, parse_ssh_public_key
from sup.errors import SupError
from sup.sources.keycloak.compare import user_input
from sup.sources.keycloak.loaded import LoadedStore, log
from sup.sources.keycloak.naming import ACTOR, SOURCE, keycloak_settings, username_of
from sup.sources.keycloak.reader import KcUser
from sup.sources.keycloak.report import SyncReport
from sup.store.models import SshKey, User
from sup.users.bulk import create_users
from sup.users.schemas import UserCreate
from sup.users.service import check_username_policy

BATCH = 1000
_CHUNK = 500  # values per IN (...) query
_IDS = ("uid_number", "primary_gid")


class NewUserBatches:
    """The plain new users of a pull, created a batch at a time in the pull's order.

    The pull walks its users by Keycloak username; `take` keeps a plain new user for the next batch,
    and the pull calls `flush` before any write of its own, so ids are allocated in the very order
    the per-user path allocates them. A batch the service refuses goes through `one_by_one`."""

    def __init__(
        self,
        session: Session,
        settings: Settings,
        store: LoadedStore,
        users: Sequence[KcUser],
        report: SyncReport,
        one_by_one: Callable[[KcUser], None],
    ) -> None:
        self.session, self.settings, self.store, self.report = session, settings, store, report
        self.one_by_one = one_by_one
        self.plain = _plain_specs(session, settings, store, users)
        self.pending: list[tuple[KcUser, UserCreate]] = []

    def take(self, kc: KcUser) -> bool:
        """Keep `kc` for the next batch if it is a plain new user; False: the caller syncs it."""
        spec = self.plain.get(kc.id)
        if spec is None:
            return False
        self.pending.append((kc, spec))
        if len(self.pending) >= BATCH:
            self.flush()
        return True

    def flush(self) -> None:
        chunk, self.pending = self.pending, []
        if not chunk:
            return
        try:
            with self.session.begin_nested():
                specs = [spec for _, spec in chunk]
                create_users(self.session, self.settings, ACTOR, specs, SOURCE, key_origin="idp")
        except (SupError, ValidationError, InvalidName) as exc:
            log.info("keycloak sync: a batch of %d new users was refused (%s); one by one", len(chunk), exc)
            for kc, _ in chunk:
                self.one_by_one(kc)
            return
        _load(self.session, self.store, chunk)
        self.report.created.extend(spec.username for _, spec in chunk)


def _plain_specs(
    session: Session, settings: Settings, store: LoadedStore, users: Sequence[KcUser]
) -> dict[str, UserCreate]:
    """Keycloak id -> spec of the users a batch may create."""
    if not settings.ids.private_groups:
        return {}  # create_users would go one by one anyway
    wanted = Counter(username_of(settings, kc) for kc in users)
    blobs = Counter(_blob(line) for kc in users for line in _key_lines(settings, kc))
    candidates: list[tuple[KcUser, UserCreate]] = []
    for kc in users:
        if kc.id in store.user_by_kc or not kc.enabled:
            continue
        username = username_of(settings, kc)
        if wanted[username] > 1 or username in store.user_by_name or username in store.group_by_name:
            continue
        if any(blobs[_blob(line)] > 1 for line in _key_lines(settings, kc)):
            continue  # another Keycloak user has that key too: whoever comes first gets it
        spec = _plain_spec(settings, kc, username)
        if spec is not None:
            candidates.append((kc, spec))
    return {kc.id: spec for kc, spec in _keys_nobody_has(session, candidates)}


def _key_lines(settings: Settings, kc: KcUser) -> list[str]:
    return [
        line for line in kc.attributes.get(keycloak_settings(settings).ssh_key_attribute, []) if line.strip()
    ]


def _blob(line: str) -> str:
    """A key line's base64 part (the same key, the same blob), or the line when it has none."""
    parts = line.split()
    return parts[1] if len(parts) > 1 else line


def _plain_spec(settings: Settings, kc: KcUser, username: str) -> UserCreate | None:
    """The user's spec if the batch may create it, else None (the per-user path will)."""
    scratch = SyncReport(mode="full")
    data = user_input(settings, kc, username, scratch, username, create=True)
    if scratch.errors or any(data.fields.get(f) is not None for f in _IDS):
        return None
    shell = data.fields.get("login_shell")
    if shell is not None and shell not in settings.accounts.allowed_shells:
        return None
    try:
        check_username_policy(settings, username)
        spec = UserCreate.model_validate({"username": username, **data.fields})
    except (SupError, ValidationError, InvalidName):
        return None
    accounts = settings.accounts
    if key_set_problem(spec.ssh_public_keys, accounts.max_ssh_keys, accounts.max_ssh_key_bytes):
        return None
    return spec


def _keys_nobody_has(
    session: Session, candidates: list[tuple[KcUser, UserCreate]]
) -> list[tuple[KcUser, UserCreate]]:
    """Leave out the users with a key that another user in the store or in this batch has."""
    fingerprints = {
        id(spec): [parse_ssh_public_key(line).fingerprint for line in spec.ssh_public_keys]
        for _, spec in candidates
    }
    seen = Counter(f for prints in fingerprints.values() for f in prints)
    everyone = sorted(seen)
    taken: set[str] = set()
    for start in range(0, len(everyone), _CHUNK):
        chunk = everyone[start : start + _CHUNK]
        taken.update(session.scalars(select(SshKey.fingerprint).where(SshKey.fingerprint.in_(chunk))))
    return [
        (kc, spec)
        for kc, spec in candidates
        if all(seen[f] == 1 and f not in taken for f in fingerprints[id(spec)])
    ]


def _load(session: Session, store: LoadedStore, chunk: Sequence[tuple[KcUser, UserCreate]]) -> None:
    """The new users as the rest of the sync sees users: in the loaded store, by name and by id."""
    names = [spec.username for _, spec in chunk]
    for start in range(0, len(names), _CHUNK):
        found = session.scalars(
            select(User)
            .where(User.username.in_(names[start : start + _CHUNK]))
            .options(selectinload(User.ssh_keys))
        ).all()
        for user in found:
            store.user_by_name[user.username] = user
            if user.external_id:
                store.user_by_kc[user.external_id] = user
