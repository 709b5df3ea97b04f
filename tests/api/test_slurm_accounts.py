"""/api/v1/slurm/accounts: the account tree, limits, and the group binding."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.helpers import fields

ACCOUNTS = "/api/v1/slurm/accounts"


def test_create_with_everything(client: TestClient, admin: dict[str, str]) -> None:
    client.post("/api/v1/groups", json={"name": "physics"}, headers=admin)
    payload = {
        "name": "phys",
        "group": "physics",
        "description": "Physics department",
        "organization": "science",
        "fairshare": 100,
        "qos": ["normal", "high"],
        "default_qos": "normal",
        "partitions": ["gpu", "cpu"],
        "limits": {"grp_tres": {"cpu": 512, "gres/gpu": 16}, "max_jobs": 50, "max_wall": "2-00:00:00"},
    }
    response = client.post(ACCOUNTS, json=payload, headers=admin)
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["group"] == "physics" and body["parent"] == "root" and body["fairshare"] == 100
    assert body["limits"] == {
        "grp_tres": {"cpu": "512", "gres/gpu": "16"},
        "max_jobs": 50,
        "max_wall": "2-00:00:00",
    }
    assert client.get(f"{ACCOUNTS}/phys", headers=admin).json() == body


def test_tree_rules(client: TestClient, admin: dict[str, str]) -> None:
    assert client.post(ACCOUNTS, json={"name": "science"}, headers=admin).status_code == 201
    assert client.post(ACCOUNTS, json={"name": "phys", "parent": "science"}, headers=admin).status_code == 201
    orphan = client.post(ACCOUNTS, json={"name": "bio", "parent": "nowhere"}, headers=admin)
    assert orphan.status_code == 422 and fields(orphan.json()) == {"parent"}
    cycle = client.patch(f"{ACCOUNTS}/science", json={"parent": "phys"}, headers=admin)
    assert cycle.status_code == 422 and "cycle" in cycle.json()["errors"][0]["message"]
    busy = client.delete(f"{ACCOUNTS}/science", headers=admin)
    assert busy.status_code == 409 and "child account 'phys'" in busy.json()["detail"]
    assert [
        a["name"] for a in client.get(ACCOUNTS, params={"parent": "science"}, headers=admin).json()["items"]
    ] == ["phys"]


def test_bad_values_name_their_field(client: TestClient, admin: dict[str, str]) -> None:
    cases = [
        ({"name": "root"}, "name"),
        ({"name": "Phys"}, "name"),
        ({"name": "root\n"}, "name"),  # `root` with a newline is still Slurm's root
        ({"name": "phys\n"}, "name"),
        ({"name": "phys", "parent": "science\n"}, "parent"),
        ({"name": "phys", "qos": ["normal\n"]}, "qos.0"),
        ({"name": "phys", "partitions": ["gpu\n"]}, "partitions.0"),
        ({"name": "phys", "limits": {"grp_tres": {"cpu\n": 1}}}, "limits.grp_tres"),
        ({"name": "phys", "limits": {"grp_tres": {"cpu": "1\n"}}}, "limits.grp_tres"),
        ({"name": "phys", "limits": {"max_wall": "60\n"}}, "limits.max_wall"),
        ({"name": "phys", "group": "nogroup_here"}, "group"),
        ({"name": "phys", "qos": ["a", "a"]}, "qos"),
        ({"name": "phys", "qos": ["normal"], "default_qos": "high"}, "body"),
        ({"name": "phys", "description": "a|b"}, "description"),
        ({"name": "phys", "fairshare": -1}, "fairshare"),
        ({"name": "phys", "limits": {"max_wall": "forever"}}, "limits.max_wall"),
        ({"name": "phys", "limits": {"GrpTRES": "cpu=1"}}, "limits.GrpTRES"),
    ]
    for payload, field in cases:
        response = client.post(ACCOUNTS, json=payload, headers=admin)
        assert response.status_code == 422, (payload, response.text)
        assert field in fields(response.json()), (payload, response.json())
    assert client.get(ACCOUNTS, headers=admin).json()["total"] == 0


def test_duplicate_and_rename(client: TestClient, admin: dict[str, str]) -> None:
    client.post(ACCOUNTS, json={"name": "phys"}, headers=admin)
    assert client.post(ACCOUNTS, json={"name": "phys"}, headers=admin).status_code == 409
    rename = client.patch(f"{ACCOUNTS}/phys", json={"name": "physics"}, headers=admin)
    assert rename.status_code == 422 and "cannot be renamed" in rename.json()["errors"][0]["message"]


def test_patch_limits_and_binding(client: TestClient, admin: dict[str, str]) -> None:
    client.post("/api/v1/groups", json={"name": "physics"}, headers=admin)
    client.post(ACCOUNTS, json={"name": "phys", "limits": {"max_jobs": 5}}, headers=admin)
    response = client.patch(
        f"{ACCOUNTS}/phys",
        json={"group": "physics", "limits": {"grp_jobs": 100}},
        headers={**admin, "If-Match": '"1"'},
    )
    assert response.status_code == 200
    assert response.json()["limits"] == {"grp_jobs": 100} and response.json()["group"] == "physics"
    unbound = client.patch(f"{ACCOUNTS}/phys", json={"group": None}, headers=admin)
    assert unbound.json()["group"] is None and unbound.json()["version"] == 3


def test_coordinators_group(client: TestClient, admin: dict[str, str]) -> None:
    client.post("/api/v1/groups", json={"name": "physics"}, headers=admin)
    client.post("/api/v1/groups", json={"name": "physics-leads"}, headers=admin)
    missing = client.post(ACCOUNTS, json={"name": "phys", "coordinators": "nobody"}, headers=admin)
    assert missing.status_code == 422 and fields(missing.json()) == {"coordinators"}
    bad = client.post(ACCOUNTS, json={"name": "phys", "coordinators": "Leads!"}, headers=admin)
    assert bad.status_code == 422 and fields(bad.json()) == {"coordinators"}
    assert client.get(ACCOUNTS, headers=admin).json()["total"] == 0

    created = client.post(
        ACCOUNTS, json={"name": "phys", "group": "physics", "coordinators": "physics-leads"}, headers=admin
    )
    assert created.status_code == 201
    body = created.json()
    assert (body["group"], body["coordinators"]) == ("physics", "physics-leads")
    assert client.get(f"{ACCOUNTS}/phys", headers=admin).json() == body
    busy = client.delete("/api/v1/groups/physics-leads", headers=admin)
    assert busy.status_code == 409 and "bound to Slurm account 'phys'" in busy.json()["detail"]

    changed = client.patch(f"{ACCOUNTS}/phys", json={"coordinators": "physics"}, headers=admin).json()
    assert changed["coordinators"] == "physics" and changed["version"] == 2
    audit = client.get(
        "/api/v1/audit", params={"resource_type": "slurm_account", "action": "update"}, headers=admin
    ).json()["items"][0]
    assert (audit["before"]["coordinators"], audit["after"]["coordinators"]) == ("physics-leads", "physics")
    cleared = client.patch(f"{ACCOUNTS}/phys", json={"coordinators": None}, headers=admin).json()
    assert cleared["coordinators"] is None
    assert client.delete("/api/v1/groups/physics-leads", headers=admin).status_code == 204
