"""Reading a Keycloak realm through its admin REST API, as a service account (client_credentials).

Every list is paginated (`first`/`max`) and every read either returns everything or raises
`ReadFailed`: a failed or partial read must never look like "these users are gone". python-keycloak
supplies the token handling (client_credentials, refresh) and the HTTP session.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote

from keycloak import KeycloakAdmin
from keycloak.exceptions import KeycloakError
from requests import RequestException

from sup.config import KeycloakSettings

T = TypeVar("T")
R = TypeVar("R")
# Members per request of a group's member list (brief representations: an id and a name or so each).
MEMBER_PAGE = 5000


class ReadFailed(RuntimeError):
    """Keycloak could not be read completely; nothing may be concluded from what was read."""


@dataclass(frozen=True)
class KcUser:
    id: str
    username: str
    email: str | None
    first_name: str | None
    last_name: str | None
    enabled: bool
    attributes: dict[str, list[str]]


@dataclass(frozen=True)
class KcGroup:
    id: str
    name: str
    path: str
    parent_id: str | None = None  # the group it is a subgroup of; None: a top-level group


@dataclass
class RealmSnapshot:
    """Everything SUP takes from a realm: users by id, groups by id, direct members per group id."""

    users: dict[str, KcUser] = field(default_factory=dict)
    groups: dict[str, KcGroup] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)
    requests: int = 0


def user_of(raw: dict[str, Any]) -> KcUser:
    attributes = raw.get("attributes") or {}
    return KcUser(
        id=str(raw["id"]),
        username=str(raw["username"]),
        email=raw.get("email") or None,
        first_name=raw.get("firstName") or None,
        last_name=raw.get("lastName") or None,
        enabled=bool(raw.get("enabled", False)),
        attributes={
            str(k): [str(v) for v in (vs if isinstance(vs, list) else [vs])] for k, vs in attributes.items()
        },
    )


def group_of(raw: dict[str, Any], parent_id: str | None = None) -> KcGroup:
    """`parent_id`: the group whose children were listed (Keycloak 23+ also says so as parentId)."""
    parent = parent_id or raw.get("parentId")
    return KcGroup(
        id=str(raw["id"]),
        name=str(raw["name"]),
        path=str(raw["path"]),
        parent_id=None if not parent else str(parent),
    )


def in_scope(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root + "/")


class RealmReader:
    def __init__(self, settings: KeycloakSettings, admin: KeycloakAdmin | None = None) -> None:
        self.settings = settings
        self.requests = 0
        self._count_lock = threading.Lock()
        verify: bool | str = settings.ca_file or settings.verify_tls
        try:
            self.admin = admin or KeycloakAdmin(
                server_url=settings.url,
                realm_name=settings.realm,
                client_id=settings.client_id,
                client_secret_key=settings.client_secret.get_secret_value(),
                verify=verify,
                timeout=settings.timeout_seconds,
            )
        except (KeycloakError, RequestException) as exc:
            raise ReadFailed(
                f"cannot log in to Keycloak as {settings.client_id!r}: {type(exc).__name__}"
            ) from None
        self.base = f"admin/realms/{quote(settings.realm, safe='')}"

    # --- HTTP ---------------------------------------------------------------------------------------

    def get(self, path: str, **params: Any) -> Any:
        """GET a path below the realm's admin API; anything but 200 with JSON is a ReadFailed."""
        return self._get(path, params, missing_ok=False)

    def get_or_none(self, path: str, **params: Any) -> Any:
        """Like get, but a 404 is an answer (the object is gone) rather than a failure."""
        return self._get(path, params, missing_ok=True)

    def _get(self, path: str, params: dict[str, Any], *, missing_ok: bool) -> Any:
        with self._count_lock:
            self.requests += 1
        try:
            response = self.admin.connection.raw_get(f"{self.base}/{path}", **params)
        except (KeycloakError, RequestException) as exc:
            raise ReadFailed(f"GET {path}: {type(exc).__name__}: {_short(str(exc))}") from None
        if missing_ok and response.status_code == 404:
            return None
        if response.status_code != 200:
            raise ReadFailed(f"GET {path}: HTTP {response.status_code}: {_short(response.text)}")
        try:
            return response.json()
        except ValueError:
            raise ReadFailed(f"GET {path}: the answer is not JSON") from None

    def pages(self, path: str, size: int | None = None, **params: Any) -> Iterator[dict[str, Any]]:
        size = size or self.settings.page_size
        first = 0
        while True:
            page = self.get(path, first=first, max=size, **params)
            if not isinstance(page, list):
                raise ReadFailed(f"GET {path}: expected a list")
            yield from page
            if len(page) < size:
                return
            first += size

    def parallel(self, read: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """`read` of each item, keycloak.read_concurrency requests in flight at once (Keycloak answers
        each in a few milliseconds, most of them its own work: requests one after the other leave
        its threads idle). The first failure is raised; nothing partial is returned."""
        todo = list(items)
        workers = min(self.settings.read_concurrency, len(todo))
        if workers <= 1:
            return [read(item) for item in todo]
        self._refresh_token()  # once, before the threads share the session
        with ThreadPoolExecutor(workers, thread_name_prefix="keycloak-read") as pool:
            return list(pool.map(read, todo))

    def _refresh_token(self) -> None:
        # The first request refreshes it, or says why it cannot.
        with contextlib.suppress(KeycloakError, RequestException, AttributeError):
            self.admin.connection._refresh_if_required()

    # --- reads ----------------------------------------------------------------------------------------

    def user_count(self) -> int:
        count = self.get("users/count")
        if not isinstance(count, int):
            raise ReadFailed("GET users/count: not a number")
        return count

    def users(self) -> dict[str, KcUser]:
        before = self.user_count()
        size = self.settings.page_size
        # The pages the count says there are, read at once; then on, as `pages` would, while the
        # last page read was full (users created meanwhile).
        offsets = list(range(0, max(before, 1), size))
        read = self.parallel(lambda first: self._user_page(first, size), offsets)
        raws = [raw for page in read for raw in page]
        first = offsets[-1] + size
        while len(read[-1]) == size:
            read.append(self._user_page(first, size))
            raws += read[-1]
            first += size
        users = {u.id: u for u in map(user_of, raws)}
        after = self.user_count()
        # Pages shift when users are created or deleted during the read; fewer users than both counts
        # means some were skipped: not a picture to delete anybody from.
        if len(users) < min(before, after):
            raise ReadFailed(
                f"read {len(users)} users but the realm counts {before} before and {after} after: "
                "the listing shifted during the read; try again"
            )
        return users

    def _user_page(self, first: int, size: int) -> list[dict[str, Any]]:
        page = self.get("users", first=first, max=size, briefRepresentation="false")
        if not isinstance(page, list):
            raise ReadFailed("GET users: expected a list")
        return page

    def groups(self) -> dict[str, KcGroup]:
        """Every group (subgroups included) at or below settings.groups_path."""
        found: dict[str, KcGroup] = {}
        todo: list[tuple[dict[str, Any], str | None]] = [
            (raw, None) for raw in self.pages("groups", briefRepresentation="false")
        ]
        while todo:
            raw, parent_id = todo.pop()
            group = group_of(raw, parent_id)
            if in_scope(group.path, self.settings.groups_path):
                found[group.id] = group
            elif not self.settings.groups_path.startswith(group.path + "/"):
                continue  # neither inside the scope nor on the way to it
            if int(raw.get("subGroupCount") or 0) > 0:
                children = self.pages(f"groups/{group.id}/children", briefRepresentation="false")
                todo.extend((child, group.id) for child in children)
        return found

    def members(self, group_id: str) -> set[str]:
        """A group's direct members, in pages of at least MEMBER_PAGE: brief entries are small, and a
        request per few hundred members is most of a realm's read."""
        size = max(self.settings.page_size, MEMBER_PAGE)
        path = f"groups/{quote(group_id, safe='')}/members"
        return {str(u["id"]) for u in self.pages(path, size, briefRepresentation="true")}

    def snapshot(self) -> RealmSnapshot:
        users = self.users()
        groups = self.groups()
        ids = list(groups)
        members = dict(zip(ids, self.parallel(self.members, ids), strict=True))
        return RealmSnapshot(users=users, groups=groups, members=members, requests=self.requests)

    def user(self, user_id: str) -> KcUser | None:
        raw = self.get_or_none(f"users/{quote(user_id, safe='')}")
        return None if raw is None else user_of(raw)

    def group(self, group_id: str) -> KcGroup | None:
        raw = self.get_or_none(f"groups/{quote(group_id, safe='')}")
        return None if raw is None else group_of(raw)

    def user_groups(self, user_id: str) -> set[str]:
        return {
            str(g["id"])
            for g in self.pages(f"users/{quote(user_id, safe='')}/groups", briefRepresentation="true")
        }

    def admin_events(self, since_ms: int) -> list[dict[str, Any]]:
        """Admin events on users, groups and memberships at or after `since_ms`, oldest first.

        Keycloak 26 takes `dateFrom` in epoch milliseconds; older servers take only a day
        (yyyy-MM-dd), which returns the whole day: the exact cut is made here either way."""
        kinds = ["USER", "GROUP", "GROUP_MEMBERSHIP"]
        try:
            found = list(
                self.pages("admin-events", dateFrom=str(since_ms), direction="asc", resourceTypes=kinds)
            )
        except ReadFailed as exc:
            if "HTTP 400" not in str(exc):
                raise
            found = list(self.pages("admin-events", dateFrom=_day(since_ms), resourceTypes=kinds))
        events = [e for e in found if int(e.get("time", 0)) >= since_ms]
        events.sort(key=lambda e: int(e.get("time", 0)))
        return events


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d")


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
