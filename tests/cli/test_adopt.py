"""`sup import --from-ldap --from-slurm`: adopting a cluster that exists without SUP (a real slapd and a
real slurmdbd, filled by hand the way another tool would have), after which the first plan is empty."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.reconcile.planner import run_pass
from sup.store.models import Group, SlurmAccount, User
from tests.support.cli import run_sup, sup_env
from tests.support.keys import ed25519_key
from tests.support.slapd import SlapdServer
from tests.support.slurmdbd import SlurmdbdServer

_numbers = itertools.count(1)
PLACEHOLDER = "cn=empty-membership-placeholder"


@pytest.fixture
def cluster(slurmdbd: SlurmdbdServer, monkeypatch: pytest.MonkeyPatch) -> str:
    slurmdbd.reset(keep_clusters=[slurmdbd.cluster])
    name = f"adopt{next(_numbers)}"
    slurmdbd.sacctmgr("add", "cluster", name)
    monkeypatch.setenv("SLURM_CONF", str(slurmdbd.slurm_conf))
    return name


def _add(c: Any, dn: str, classes: list[str], attributes: dict[str, Any]) -> None:
    _, result, _, _ = c.add(dn, classes, attributes)
    assert result["result"] == 0, result


def _existing_directory(slapd: SlapdServer, base: str, key: str) -> None:
    """What a cluster set up by hand holds: people with private groups, and two shared groups."""
    people, groups = f"ou=people,{base}", f"ou=groups,{base}"
    with slapd.admin() as c:
        for ou in ("people", "groups", "SUDOers"):
            _add(c, f"ou={ou},{base}", ["organizationalUnit"], {"ou": ou})
        for name, uid, cn, given, sn, keys in (
            ("alice", 20001, "Alice Liddell", "Alice", "Liddell", [key]),
            ("bob", 20002, "bob", None, None, []),
            ("carol", 20003, "Carol Danvers", None, "Danvers", []),
        ):
            attributes: dict[str, Any] = {
                "uid": name,
                "cn": cn,
                "sn": sn or name,
                "uidNumber": str(uid),
                "gidNumber": str(uid),
                "homeDirectory": f"/home/{name}",
                "loginShell": "/bin/bash",
                "gecos": cn,
                "mail": f"{name}@example.org",
            }
            if given:
                attributes["givenName"] = given
            if keys:
                attributes["sshPublicKey"] = keys
            _add(c, f"uid={name},{people}", ["inetOrgPerson", "posixAccount", "ldapPublicKey"], attributes)
            _add(
                c,
                f"cn={name},{groups}",
                ["groupOfNames", "posixGroup"],
                {"cn": name, "gidNumber": str(uid), "member": [PLACEHOLDER]},
            )
        for name, gid, members in (("physics", 50100, ["alice", "bob"]), ("chem", 50101, ["carol"])):
            _add(
                c,
                f"cn={name},{groups}",
                ["groupOfNames", "posixGroup"],
                {
                    "cn": name,
                    "gidNumber": str(gid),
                    "description": f"the {name} lab",
                    "member": [f"uid={m},{people}" for m in members],
                },
            )


def test_adopting_ldap_and_slurm_then_the_first_plan_is_empty(
    slapd_rfc2307bis: SlapdServer,
    slurmdbd: SlurmdbdServer,
    cluster: str,
    store_url: str,
    store_sessions: sessionmaker[Session],
    tmp_path: Path,
) -> None:
    base = slapd_rfc2307bis.new_base("adopt")
    key = ed25519_key("alice@laptop")
    _existing_directory(slapd_rfc2307bis, base, key)
    slurmdbd.sacctmgr(
        "add", "account", "physics", f"cluster={cluster}", "fairshare=20", "description=physics lab"
    )
    slurmdbd.sacctmgr("add", "account", "chem", f"cluster={cluster}", "MaxJobs=7")
    slurmdbd.sacctmgr("add", "user", "alice,bob", "account=physics", f"cluster={cluster}")
    slurmdbd.sacctmgr("add", "user", "carol", "account=chem", f"cluster={cluster}")

    ldap = slapd_rfc2307bis.ldap_settings(base)
    slurm = {"cluster": cluster, "sacctmgr": slurmdbd.bin["sacctmgr"], "lock_dir": str(tmp_path / "locks")}
    env = sup_env(
        SUP_DATABASE_URL=store_url,
        **{f"SUP_LDAP__{k.upper()}": str(v) for k, v in ldap.items()},
        **{f"SUP_SLURM__{k.upper()}": v for k, v in slurm.items()},
        SLURM_CONF=str(slurmdbd.slurm_conf),
    )
    dry = run_sup("import", "--from-ldap", "--from-slurm", "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["summary"]["user"]["created"] == 3

    result = run_sup("import", "--from-ldap", "--from-slurm", "--json", env=env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)["summary"]
    assert (summary["user"]["created"], summary["group"]["created"], summary["slurm_account"]["created"]) == (
        3,
        2,
        2,
    )

    with store_sessions() as session:
        users = {u.username: u for u in session.scalars(select(User))}
        assert {n: (u.uid_number, u.primary_gid, u.source) for n, u in users.items()} == {
            "alice": (20001, 20001, "import"),
            "bob": (20002, 20002, "import"),
            "carol": (20003, 20003, "import"),
        }
        assert users["alice"].display_name == "Alice Liddell" and users["alice"].given_name == "Alice"
        assert [k.line for k in users["alice"].ssh_keys] == [key]
        physics = session.scalars(select(Group).where(Group.name == "physics")).one()
        assert physics.gid_number == 50100 and sorted(m.user.username for m in physics.memberships) == [
            "alice",
            "bob",
        ]
        accounts = {a.name: a for a in session.scalars(select(SlurmAccount))}
        assert accounts["physics"].fairshare == 20 and accounts["physics"].group is not None
        assert accounts["chem"].limits == {"max_jobs": 7}

    settings = Settings(database_url=store_url, ldap=ldap, slurm=slurm)
    planned = run_pass(settings, store_sessions, only=["ldap", "slurm"])
    assert planned.ok, [(t.target, t.error) for t in planned.targets]
    assert [c.as_json() for c in planned.changes] == []

    again = run_sup("import", "--from-ldap", "--from-slurm", "--json", env=env)
    assert again.returncode == 0 and json.loads(again.stdout)["changes"] == []

    # A new person for the physics lab: --dry-run --plan shows what the targets would get, writes nothing.
    new = tmp_path / "new.csv"
    new.write_text("username,email,display_name,groups\ndora,dora@example.org,Dora,physics\n")
    previewed = run_sup("import", str(new), "--dry-run", "--plan", "--json", env=env)
    assert previewed.returncode == 0, previewed.stderr
    planned_changes = {
        (c["target"], c["action"], c["kind"], c["name"]) for c in json.loads(previewed.stdout)["plan"]
    }
    assert ("ldap", "create", "user", "dora") in planned_changes
    assert any(t == "slurm" and "dora" in n for t, _, _, n in planned_changes), planned_changes
    with store_sessions() as session:
        assert session.scalars(select(User).where(User.username == "dora")).first() is None


def test_adoption_reports_a_shared_primary_group_and_a_missing_source(
    slapd_rfc2307bis: SlapdServer, store_url: str
) -> None:
    base = slapd_rfc2307bis.new_base("adopt")
    with slapd_rfc2307bis.admin() as c:
        for ou in ("people", "groups"):
            _add(c, f"ou={ou},{base}", ["organizationalUnit"], {"ou": ou})
        _add(
            c,
            f"cn=staff,ou=groups,{base}",
            ["groupOfNames", "posixGroup"],
            {"cn": "staff", "gidNumber": "50200", "member": [PLACEHOLDER]},
        )
        _add(
            c,
            f"uid=dave,ou=people,{base}",
            ["inetOrgPerson", "posixAccount"],
            {
                "uid": "dave",
                "cn": "dave",
                "sn": "dave",
                "uidNumber": "20010",
                "gidNumber": "50200",
                "homeDirectory": "/home/dave",
            },
        )
    ldap = slapd_rfc2307bis.ldap_settings(base)
    env = sup_env(SUP_DATABASE_URL=store_url, **{f"SUP_LDAP__{k.upper()}": str(v) for k, v in ldap.items()})
    result = run_sup("import", "--from-ldap", env=env)
    assert result.returncode == 5
    assert "primary gid 50200 is group 'staff', not a private group 'dave'" in result.stderr
    missing = run_sup("import", "--from-slurm", env=env)
    assert missing.returncode == 6 and "slurm target is not configured" in missing.stderr
