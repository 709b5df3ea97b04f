"""The IdPs' lookup by userName (sup/scim/lookup.py) answers as the generic search does.

Each lookup is sent twice: as IdPs send it (the short path) and with the comparison in parentheses,
which means the same to any SCIM server but is not the shape the short path takes (the generic
path). The two answers must be equal, status, headers and body; the short path must have served
the first (counted), else the comparison would prove nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from httpx import Response
from prometheus_client import REGISTRY

from sup.scim import lookup
from sup.scim.filtering import MAX_FILTER_VALUE_LENGTH
from tests.scim.conftest import ENTERPRISE, SCIM, create_group, create_user


@pytest.fixture
def short_path(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The userNames the short path answered."""
    answered: list[str] = []
    real = lookup.answer

    def counted(*args: Any) -> Any:
        answered.append(args[-1].user_name)
        return real(*args)

    monkeypatch.setattr(lookup, "answer", counted)
    return answered


@pytest.fixture
def site(client: TestClient, okta: dict[str, str], admin: dict[str, str]) -> None:
    """People of every shape the resource has: groups, keys, emails, extensions, inactive, no
    userName of their own (created by an admin, found by their POSIX username)."""
    kim = create_user(
        client,
        okta,
        "Kim.Lee@Corp.Example",
        name={"givenName": "Kim", "familyName": "Lee", "middleName": "J"},
        displayName="Kim Lee",
        emails=[
            {"value": "kim@corp.example", "type": "work", "primary": True},
            {"value": "kim@home.example", "type": "home"},
        ],
        title="Researcher",
        **{
            ENTERPRISE: {"department": "HPC", "manager": {"value": "boss-1"}},
            "urn:ietf:params:scim:schemas:extension:sup:2.0:User": {
                "sshPublicKeys": [
                    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl kim"
                ]
            },
        },
    )
    create_user(client, okta, "gone@corp.example", active=False)
    create_group(client, okta, "Physics", [kim["id"]])
    create_group(client, okta, "Chemistry", [kim["id"]])
    made = client.post("/api/v1/users", json={"username": "ops1"}, headers=admin)
    assert made.status_code == 201, made.text


def _both(
    client: TestClient, headers: dict[str, str], expression: str, **paging: str
) -> tuple[Response, Response]:
    short = client.get(f"{SCIM}/Users", params={"filter": expression, **paging}, headers=headers)
    generic = client.get(f"{SCIM}/Users", params={"filter": f"({expression})", **paging}, headers=headers)
    return short, generic


def _same(short: Response, generic: Response) -> None:
    assert short.status_code == generic.status_code, (short.text, generic.text)
    assert short.json() == generic.json()
    ignored = {"x-request-id"}  # a new id for each request
    assert {k: v for k, v in short.headers.items() if k not in ignored} == {
        k: v for k, v in generic.headers.items() if k not in ignored
    }


@pytest.mark.parametrize(
    ("expression", "paging", "found"),
    [
        ('userName eq "Kim.Lee@Corp.Example"', {}, 1),
        ('userName eq "KIM.LEE@CORP.EXAMPLE"', {"startIndex": "1", "count": "100"}, 1),  # Okta's form
        ('USERNAME eq "kim.lee@corp.example"', {}, 1),
        ('urn:ietf:params:scim:schemas:core:2.0:User:userName eq "kim.lee@corp.example"', {}, 1),
        ('userName EQ "gone@corp.example"', {}, 1),
        ('userName eq "ops1"', {}, 1),  # no userName of its own: its POSIX username
        ('userName eq "nobody@corp.example"', {}, 0),
        ('userName eq ""', {}, 0),
        ('userName eq "kim.lee@corp.example"', {"count": "0"}, 1),
        ('userName eq "kim.lee@corp.example"', {"startIndex": "2"}, 1),
    ],
)
@pytest.mark.usefixtures("site")
def test_a_lookup_by_user_name_answers_what_the_generic_search_answers(
    client: TestClient,
    okta: dict[str, str],
    short_path: list[str],
    expression: str,
    paging: dict[str, str],
    found: int,
) -> None:
    short, generic = _both(client, okta, expression, **paging)
    assert short_path, "the lookup took the generic path: the comparison proves nothing"
    _same(short, generic)
    assert short.json()["totalResults"] == found


@pytest.mark.usefixtures("site")
def test_the_lookup_returns_the_whole_resource(
    client: TestClient, okta: dict[str, str], short_path: list[str]
) -> None:
    """What an IdP reads back: groups with their URLs, the key, the kept attributes, its location."""
    response = client.get(
        f"{SCIM}/Users", params={"filter": 'userName eq "kim.lee@corp.example"'}, headers=okta
    )
    assert short_path == ["kim.lee@corp.example"]
    (kim,) = response.json()["Resources"]
    assert kim["meta"]["location"] == f"http://testserver{SCIM}/Users/{kim['id']}"
    assert [g["display"] for g in kim["groups"]] == ["Chemistry", "Physics"]
    assert all(g["$ref"].startswith(f"http://testserver{SCIM}/Groups/") for g in kim["groups"])
    assert kim["title"] == "Researcher" and kim[ENTERPRISE]["department"] == "HPC"
    assert kim["urn:ietf:params:scim:schemas:extension:sup:2.0:User"]["sshPublicKeys"][0].endswith(" kim")


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ({"count": "many"}, 400),  # the paging parameters are still the library's to check
        ({"startIndex": "x"}, 400),
    ],
)
@pytest.mark.usefixtures("site")
def test_bad_paging_beside_a_lookup_is_refused_as_in_any_search(
    client: TestClient, okta: dict[str, str], query: dict[str, str], status: int
) -> None:
    short, generic = _both(client, okta, 'userName eq "kim.lee@corp.example"', **query)
    _same(short, generic)
    assert short.status_code == status


@pytest.mark.parametrize(
    "query",
    [
        {"filter": 'userName eq "kim.lee@corp.example"', "attributes": "userName"},
        {"filter": 'userName eq "kim.lee@corp.example"', "sortBy": "userName"},
        {"filter": 'userName eq "a\\"b"'},  # an escape: the generic path decodes it
        {"filter": f'userName eq "{"x" * (MAX_FILTER_VALUE_LENGTH + 1)}"'},  # over the cap: its 400
        {"filter": 'userName eq  "kim.lee@corp.example"'},
        {"filter": 'userName ne "kim.lee@corp.example"'},
        {"filter": 'userName eq "kim.lee@corp.example" or userName eq "x"'},
        {"filter": 'externalId eq "kim"'},
        {"startIndex": "1"},
    ],
)
def test_other_searches_take_the_generic_path(query: dict[str, str]) -> None:
    assert lookup.lookup_of(query) is None


def test_a_repeated_parameter_takes_the_generic_path() -> None:
    query = {"filter": 'userName eq "kim"'}
    assert lookup.lookup_of(query) == lookup.Lookup("kim", {})
    assert lookup.lookup_of(query, repeated=True) is None


def test_a_lookup_counts_as_a_search_in_the_metrics(
    client: TestClient, okta: dict[str, str], short_path: list[str]
) -> None:
    labels = {"connection": "okta", "operation": "search", "status": "200"}
    before = REGISTRY.get_sample_value("sup_scim_requests_total", labels) or 0.0
    client.get(f"{SCIM}/Users", params={"filter": 'userName eq "x"'}, headers=okta)
    assert short_path == ["x"]
    assert REGISTRY.get_sample_value("sup_scim_requests_total", labels) == before + 1
