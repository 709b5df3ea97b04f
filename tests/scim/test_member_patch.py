"""The IdPs' member PATCH (sup/scim/member_patch.py) answers and writes as the generic path does.

Two groups start alike: the same members, made the same way, so the same version. Each PATCH is
sent to the first on whatever path SUP takes, and to the second with the short path switched off.
The answers must be equal (status, headers and body, but for each group's own id, name and
times), and so must what each wrote: the members, the version, the audit entry, the outbox marks.
Each case also says whether the short path must have served it (else the comparison of a served
case proves nothing) or must have handed it to the generic path (it writes nothing then).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sup.scim import member_patch
from sup.store.models import AuditEntry, Group, OutboxMark
from tests.scim.conftest import PATCH_OP, SCIM, create_group, create_user

USERS = ("u0", "u1", "u2", "u3", "u4")
FIRST_MEMBERS = ("u0", "u1", "u2")


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each member PATCH the short path saw: whether it answered it (else the generic path did)."""
    seen: list[bool] = []
    real = member_patch.answer

    def counted(*args: Any) -> Any:
        response = real(*args)
        seen.append(response is not None)
        return response

    monkeypatch.setattr(member_patch, "answer", counted)
    return seen


class Site:
    def __init__(self, client: TestClient, headers: dict[str, str], prefix: str = "") -> None:
        self.client = client
        self.headers = headers
        self.ids = {name: create_user(client, headers, prefix + name)["id"] for name in USERS}
        members = [self.ids[name] for name in FIRST_MEMBERS]
        self.twins = [
            create_group(client, headers, prefix + name, members)["id"] for name in ("twin-a", "twin-b")
        ]

    def operations(self, spec: list[tuple[str, str, list[str]]]) -> list[dict[str, Any]]:
        """(op, form, names): form `list` is a value list, `filter` one `members[value eq ...]`."""
        made: list[dict[str, Any]] = []
        for op, form, names in spec:
            ids = [self.ids.get(n, n) for n in names]
            if form == "filter":
                (one,) = ids
                made.append({"op": op, "path": f'members[value eq "{one}"]'})
            else:
                # Okta names each member it adds; a removal by value list (Entra ID, authentik)
                # gives the ids alone.
                shown = {"display": "x"} if op.lower() == "add" else {}
                made.append({"op": op, "path": form, "value": [{"value": i, **shown} for i in ids]})
        return made

    def patch(self, group_id: str, operations: list[dict[str, Any]]) -> Response:
        body = {"schemas": [PATCH_OP], "Operations": operations}
        response: Response = self.client.patch(f"{SCIM}/Groups/{group_id}", json=body, headers=self.headers)
        return response


@pytest.fixture
def site(client: TestClient, okta: dict[str, str]) -> Site:
    return Site(client, okta)


def _state(sessions: sessionmaker[Session], name: str) -> dict[str, Any]:
    with sessions() as session:
        group = session.scalars(select(Group).where(Group.name == name)).one()
        audit = session.scalars(
            select(AuditEntry).where(AuditEntry.resource_name == name).order_by(AuditEntry.id)
        ).all()
        return {
            "members": sorted(m.user.username for m in group.memberships),
            "version": group.version,
            "audit": [(a.action, a.actor, _plain(a.before, name), _plain(a.after, name)) for a in audit],
        }


def _plain(entry: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    """An audit snapshot without what differs between the twins by construction."""
    if entry is None:
        return None
    kept = {k: v for k, v in entry.items() if k not in ("gid_number", "created_at", "updated_at")}
    return {**kept, "name": "twin"} if kept.get("name") == name else kept


def _marks(sessions: sessionmaker[Session]) -> dict[tuple[str, str], int]:
    with sessions() as session:
        return {(m.kind, m.name): m.generation for m in session.scalars(select(OutboxMark))}


def _marked(before: dict[tuple[str, str], int], after: dict[tuple[str, str], int], twin: str) -> set[Any]:
    changed = {key for key, generation in after.items() if before.get(key) != generation}
    return {(kind, "twin" if name == twin else name) for kind, name in changed}


def _answer(response: Response, group_id: str) -> tuple[int, dict[str, str], Any]:
    body = response.json()
    if isinstance(body, dict) and body.get("id") == group_id:
        meta = body["meta"]
        assert meta["lastModified"] >= meta["created"]
        body = {
            **body,
            "id": "twin",
            "displayName": "twin",
            "meta": {**meta, "created": "-", "lastModified": "-", "location": "-"},
        }
    headers = {k: v for k, v in response.headers.items() if k not in ("x-request-id", "content-location")}
    if isinstance(body, dict) and "detail" in body:
        body = {**body, "detail": body["detail"].replace(group_id, "twin")}
    return response.status_code, headers, body


CASES = {
    # name: (operations, served by the short path)
    "okta adds one": ([("add", "members", ["u3"])], True),
    "adds two, one already a member": ([("add", "members", ["u2", "u4"])], True),
    "okta removes one by filter": ([("remove", "filter", ["u0"])], True),
    "entra removes two by a value list": ([("Remove", "members", ["u0", "u1"])], True),
    "entra adds, capitalised": ([("Add", "members", ["u3"])], True),
    "adds and removes in one": ([("add", "members", ["u3", "u4"]), ("remove", "filter", ["u1"])], True),
    "removes every member": ([("remove", "members", ["u0", "u1", "u2"])], True),
    "adds a member already there": ([("add", "members", ["u1"])], True),
    "adds one and takes them out again": ([("add", "members", ["u3"]), ("remove", "filter", ["u3"])], True),
    "removes a non-member": ([("remove", "filter", ["u4"])], False),
    "adds an id of nobody": ([("add", "members", ["u3", "no-such-id"])], False),
}


@pytest.mark.parametrize("case", CASES)
def test_a_member_patch_answers_and_writes_what_the_generic_path_does(
    site: Site,
    sessions: sessionmaker[Session],
    served: list[bool],
    monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    spec, short = CASES[case]
    operations = site.operations(spec)
    first, second = site.twins
    marks = _marks(sessions)
    response = site.patch(first, operations)
    after_first = _marks(sessions)
    assert served == [short], "the case took another path than it is meant to"
    with monkeypatch.context() as generic_only:
        generic_only.setattr(member_patch, "member_patch_of", lambda *args: None)
        generic = site.patch(second, operations)
    assert served == [short]  # the second went the generic way
    assert _answer(response, first) == _answer(generic, second)
    assert _marked(marks, after_first, "twin-a") == _marked(after_first, _marks(sessions), "twin-b")
    assert _state(sessions, "twin-a") == _state(sessions, "twin-b")
    if response.status_code == 200:
        # What the PATCH answered is what the group now is.
        read = site.client.get(f"{SCIM}/Groups/{first}", headers=site.headers)
        assert read.json() == response.json()
        assert read.headers["etag"] == response.headers["etag"]


def test_a_served_patch_writes_one_audit_entry_with_who_joined_and_left(
    site: Site, sessions: sessionmaker[Session], served: list[bool]
) -> None:
    operations = site.operations([("add", "members", ["u3"]), ("remove", "filter", ["u0"])])
    response = site.patch(site.twins[0], operations)
    assert served == [True] and response.status_code == 200, response.text
    assert sorted(m["display"] for m in response.json()["members"]) == ["u1", "u2", "u3"]
    action, actor, before, after = _state(sessions, "twin-a")["audit"][-1]
    assert (action, actor) == ("update", "okta")
    assert before is not None and before["members"] == ["u0", "u1", "u2"]
    assert after is not None and after["members"] == ["u1", "u2", "u3"]
    assert (after["members_added"], after["members_removed"]) == (["u3"], ["u0"])
    assert after["version"] == before["version"] + 1


@pytest.fixture
def other_connection(client: TestClient, connection: Callable[[str], dict[str, str]]) -> Site:
    return Site(client, connection("entra"), prefix="e-")


def test_another_connections_users_and_groups_go_the_generic_way(
    site: Site,
    other_connection: Site,
    sessions: sessionmaker[Session],
    served: list[bool],
) -> None:
    """A user of another source is left out (with a warning), a group of another source is a 403:
    the generic path's answers, and the short path writes nothing first."""
    foreign_user = {"value": other_connection.ids["u3"]}
    response = site.patch(site.twins[0], [{"op": "add", "path": "members", "value": [foreign_user]}])
    assert response.status_code == 200 and served == [False]
    assert _state(sessions, "twin-a")["members"] == ["u0", "u1", "u2"]
    refused = site.patch(other_connection.twins[0], site.operations([("add", "members", ["u3"])]))
    assert refused.status_code == 403 and served == [False, False]


ADD_ONE = {"op": "add", "path": "members", "value": [{"value": "1"}]}


def _body(*operations: dict[str, Any], schemas: tuple[str, ...] = (PATCH_OP,)) -> bytes:
    return json.dumps({"schemas": list(schemas), "Operations": list(operations)}).encode()


@pytest.mark.parametrize(
    ("body", "query", "headers"),
    [
        (_body({"op": "replace", "path": "members", "value": []}), {}, {}),
        (_body({"op": "add", "path": "displayName", "value": "x"}), {}, {}),
        (_body({"op": "add", "path": "members", "value": [{"value": "1", "type": "Group"}]}), {}, {}),
        (_body({"op": "add", "path": "members", "value": [{"value": "1"}, {"value": "1"}]}), {}, {}),
        (_body({"op": "remove", "path": "members"}), {}, {}),
        (_body({"op": "remove", "path": "members", "value": [{"value": "1", "display": "x"}]}), {}, {}),
        (_body(), {}, {}),
        (_body(ADD_ONE, schemas=("other",)), {}, {}),
        (_body(ADD_ONE), {"attributes": "id"}, {}),
        (_body(ADD_ONE), {}, {"if-match": 'W/"1"'}),
        (_body(ADD_ONE), {}, {"content-type": "text/plain"}),
        (b"{not json", {}, {}),
    ],
)
def test_anything_but_a_plain_member_change_is_left_to_the_generic_path(
    body: bytes, query: dict[str, str], headers: dict[str, str]
) -> None:
    assert member_patch.member_patch_of(body, query, headers) is None


def test_the_shapes_the_idps_send_are_recognised() -> None:
    body = _body(
        {"op": "Add", "path": "members", "value": [{"value": "a", "display": "A"}, {"value": "b"}]},
        {"op": "remove", "path": 'members[value eq "c"]'},
        {"op": "Remove", "path": "members", "value": [{"value": "d"}]},
    )
    found = member_patch.member_patch_of(body, {}, {"content-type": "application/scim+json"})
    assert found == member_patch.MemberPatch(
        (
            member_patch.Step(True, ("a", "b")),
            member_patch.Step(False, ("c",)),
            member_patch.Step(False, ("d",)),
        )
    )
