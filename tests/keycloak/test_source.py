"""The Keycloak source against a real Keycloak: pull, change in Keycloak, pull again; the store and,
end to end, the LDAP directory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.sources.keycloak.runner import events_sync, full_sync
from sup.store.models import Group, SourceState, User
from sup.users.schemas import UserCreate, UserPatch
from sup.users.service import create_user, update_user
from tests.conftest import ACTOR
from tests.keycloak.conftest import Writes
from tests.ldap.site import Site
from tests.support.keycloak import Realm
from tests.support.keys import ed25519_key


def _user(sessions: sessionmaker[Session], username: str) -> dict[str, Any] | None:
    with sessions() as session:
        user = session.scalars(select(User).where(User.username == username)).one_or_none()
        if user is None:
            return None
        return {
            "source": user.source,
            "external_id": user.external_id,
            "email": user.email,
            "display_name": user.display_name,
            "uid": user.uid_number,
            "gid": user.primary_gid,
            "shell": user.login_shell,
            "active": user.active,
            "keys": sorted((k.origin, k.line) for k in user.ssh_keys),
            "groups": sorted(m.group.name for m in user.memberships),
        }


def _groups(sessions: sessionmaker[Session]) -> dict[str, list[str]]:
    with sessions() as session:
        groups = session.scalars(select(Group).where(Group.private_user_id.is_(None))).all()
        return {g.name: sorted(m.user.username for m in g.memberships) for g in groups}


def _members(site: Site, entry: dict[str, list[str]]) -> list[str]:
    suffix = "," + site.users_dn.lower()
    return sorted(
        dn.split(",")[0].split("=")[1] for dn in entry.get("member", []) if dn.lower().endswith(suffix)
    )


def test_pull_change_pull_reaches_the_store_and_ldap(
    realm: Realm, ldap_site: Callable[..., Site], store_engine: Engine, kc_sessions: sessionmaker[Session]
) -> None:
    site = ldap_site(keycloak={"group_names": "path", "page_size": 2})
    settings = site.settings
    key1, key2 = ed25519_key("alice@laptop"), ed25519_key("alice@desk")
    alice = realm.add_user(
        "Alice.Smith",
        email="alice@example.org",
        first="Alice",
        last="Smith",
        attributes={"sshPublicKey": [key1], "uidNumber": ["20001"], "loginShell": ["/bin/zsh"]},
    )
    bob = realm.add_user("bob", email="bob@example.org")
    realm.add_user("carol", enabled=False)
    dave = realm.add_user("dave")
    hpc = realm.add_group("HPC")
    gpu = realm.add_group("gpu", parent=hpc)
    ml = realm.add_group("ml")
    for user, group in ((alice, gpu), (bob, gpu), (bob, ml), (dave, ml)):
        realm.admin.group_user_add(user, group)

    report = full_sync(settings, store_engine, kc_sessions)
    assert report.ok, report.as_json()
    assert sorted(report.created) == ["alice_smith", "bob", "dave"]  # carol is disabled: not created
    assert _user(kc_sessions, "carol") is None
    a = _user(kc_sessions, "alice_smith")
    assert a is not None
    assert a["source"] == "keycloak" and a["external_id"] == alice
    assert (a["email"], a["display_name"], a["uid"], a["shell"]) == (
        "alice@example.org",
        "Alice Smith",
        20001,
        "/bin/zsh",
    )
    assert a["keys"] == [("idp", key1)]
    assert _groups(kc_sessions) == {"hpc": [], "hpc-gpu": ["alice_smith", "bob"], "ml": ["bob", "dave"]}

    site.converge()
    entry = site.entry(site.user_dn("alice_smith"))
    assert entry is not None
    assert entry["uidNumber"] == ["20001"] and entry["loginShell"] == ["/bin/zsh"]
    assert entry["sshPublicKey"] == [key1]
    gpu_entry = site.entry(site.group_dn("hpc-gpu"))
    assert gpu_entry is not None
    assert _members(site, gpu_entry) == ["alice_smith", "bob"]

    # A pull without changes in Keycloak writes nothing at all.
    writes = Writes(store_engine)
    again = full_sync(settings, store_engine, kc_sessions)
    assert again.ok and again.writes == 0, again.as_json()
    state_writes = 2  # the source state row: the lock-free bookkeeping of this pull
    assert writes.count <= state_writes

    # Change everything the issue lists: rename a group, disable a user, remove a member, edit an
    # attribute; and delete a user.
    realm.admin.update_group(ml, {"name": "AI"})
    realm.admin.update_user(bob, {"enabled": False})
    realm.admin.group_user_remove(alice, gpu)
    realm.admin.update_user(
        alice,
        {
            "email": "alice@example.org",
            "firstName": "Alice",
            "lastName": "Smith",
            "attributes": {"sshPublicKey": [key1, key2], "uidNumber": ["20001"], "loginShell": ["/bin/bash"]},
        },
    )
    realm.admin.delete_user(dave)

    report = full_sync(settings, store_engine, kc_sessions)
    assert report.ok, report.as_json()
    assert sorted(report.suspended) == ["bob", "dave"]
    assert report.groups_updated == ["ai"]
    a = _user(kc_sessions, "alice_smith")
    assert a is not None
    assert a["shell"] == "/bin/bash" and a["groups"] == []
    assert a["keys"] == sorted([("idp", key1), ("idp", key2)])
    b, d = _user(kc_sessions, "bob"), _user(kc_sessions, "dave")
    assert b is not None and d is not None
    assert not b["active"] and not d["active"]  # suspended; dave's deletion lifecycle has started
    # bob, disabled, is still a member in Keycloak; dave, deleted there, is nobody's member any more.
    assert _groups(kc_sessions) == {"hpc": [], "hpc-gpu": ["bob"], "ai": ["bob"]}

    result = site.reconcile(force=True)  # two of three users locked: over the share guard
    assert result.ok, [(t.state, t.error) for t in result.targets]
    entry = site.entry(site.user_dn("alice_smith"))
    assert entry is not None
    assert entry["loginShell"] == ["/bin/bash"] and sorted(entry["sshPublicKey"]) == sorted([key1, key2])
    assert site.entry(site.group_dn("ml")) is None
    ai = site.entry(site.group_dn("ai"))
    assert ai is not None
    bob_entry = site.entry(site.user_dn("bob"))
    assert bob_entry is not None and bob_entry["loginShell"] == ["/usr/sbin/nologin"]
    gpu_entry = site.entry(site.group_dn("hpc-gpu"))
    assert gpu_entry is not None and _members(site, gpu_entry) == []  # bob is locked: no groups

    # Bob comes back: same uid.
    uid = b["uid"]
    realm.admin.update_user(bob, {"enabled": True})
    report = full_sync(settings, store_engine, kc_sessions)
    assert report.reactivated == ["bob"]
    b = _user(kc_sessions, "bob")
    assert b is not None and b["active"] and b["uid"] == uid


def test_self_managed_and_admin_keys_survive_pulls(
    realm: Realm,
    make_settings: Callable[..., Settings],
    store_engine: Engine,
    kc_sessions: sessionmaker[Session],
) -> None:
    settings = make_settings()
    idp_key, own_key = ed25519_key("idp"), ed25519_key("own")
    kim = realm.add_user("kim", attributes={"sshPublicKey": [idp_key, "not a key"]})
    report = full_sync(settings, store_engine, kc_sessions)
    assert report.created == ["kim"]
    assert any("not valid" in e for e in report.errors)  # the bad key is reported, the user made
    with kc_sessions.begin() as session:
        update_user(
            session,
            settings,
            ACTOR,
            "kim",
            UserPatch(ssh_public_keys=[own_key]),
            key_origin="self",
            keys_of_origin_only=True,
        )
    realm.admin.update_user(kim, {"attributes": {"sshPublicKey": []}})
    full_sync(settings, store_engine, kc_sessions)
    k = _user(kc_sessions, "kim")
    assert k is not None and k["keys"] == [("self", own_key)]  # the IdP's key went, the own key stayed


def test_empty_realm_trips_the_guards(
    realm: Realm, ldap_site: Callable[..., Site], store_engine: Engine, kc_sessions: sessionmaker[Session]
) -> None:
    site = ldap_site(reconcile={"max_suspensions": 2})
    ids = [realm.add_user(f"user{i}") for i in range(6)]
    assert full_sync(site.settings, store_engine, kc_sessions).ok
    site.converge()
    for user_id in ids:
        realm.admin.delete_user(user_id)

    report = full_sync(site.settings, store_engine, kc_sessions)
    assert report.refused is not None and "would suspend 6 of the 6" in report.refused
    assert all(_user(kc_sessions, f"user{i}")["active"] for i in range(6))  # type: ignore[index]
    with kc_sessions() as session:
        state = session.get(SourceState, "keycloak")
        assert state is not None and state.last_error == report.refused

    forced = full_sync(site.settings, store_engine, kc_sessions, force=True)
    assert len(forced.suspended) == 6
    # The store now says everybody left; the reconciler's own guard keeps LDAP as it is.
    result = site.reconcile()
    assert not result.ok
    assert "max_suspensions" in (result.targets[0].error or "")
    assert site.entry(site.user_dn("user0"))["loginShell"] == ["/bin/bash"]  # type: ignore[index]


def test_a_failed_read_changes_nothing(
    realm: Realm,
    make_settings: Callable[..., Settings],
    store_engine: Engine,
    kc_sessions: sessionmaker[Session],
) -> None:
    settings = make_settings()
    realm.add_user("lee")
    assert full_sync(settings, store_engine, kc_sessions).created == ["lee"]
    wrong = make_settings(keycloak={"client_secret": "wrong"})
    report = full_sync(wrong, store_engine, kc_sessions)
    assert not report.ok and "reading Keycloak failed" in report.errors[0]
    assert "wrong" not in str(report.as_json())
    lee = _user(kc_sessions, "lee")
    assert lee is not None and lee["active"]


def test_ownership_conflicts_are_reported_and_precedence_takes_over(
    realm: Realm,
    make_settings: Callable[..., Settings],
    store_engine: Engine,
    kc_sessions: sessionmaker[Session],
) -> None:
    settings = make_settings()
    with kc_sessions.begin() as session:
        create_user(session, settings, ACTOR, UserCreate(username="erin", email="erin@old.example"))
    realm.add_user("erin", email="erin@new.example")
    report = full_sync(settings, store_engine, kc_sessions)
    assert len(report.conflicts) == 1 and "owned by source 'api'" in report.conflicts[0]
    erin = _user(kc_sessions, "erin")
    assert erin is not None and erin["source"] == "api" and erin["email"] == "erin@old.example"

    ranked = make_settings(sources={"precedence": ["keycloak", "api"]})
    report = full_sync(ranked, store_engine, kc_sessions)
    assert report.conflicts == []
    erin = _user(kc_sessions, "erin")
    assert erin is not None and erin["source"] == "keycloak" and erin["email"] == "erin@new.example"


def test_admin_events_apply_between_full_pulls(
    realm: Realm,
    make_settings: Callable[..., Settings],
    store_engine: Engine,
    kc_sessions: sessionmaker[Session],
) -> None:
    settings = make_settings()
    pat = realm.add_user("pat")
    lab = realm.add_group("lab")
    assert events_sync(settings, store_engine, kc_sessions) is None  # no full pull yet: no cursor
    assert full_sync(settings, store_engine, kc_sessions).ok

    quinn = realm.add_user("quinn")
    realm.admin.group_user_add(quinn, lab)
    realm.admin.group_user_add(pat, lab)
    realm.admin.update_user(pat, {"email": "pat@example.org"})
    report = events_sync(settings, store_engine, kc_sessions)
    assert report is not None and report.ok, report
    assert report.created == ["quinn"]
    assert _groups(kc_sessions) == {"lab": ["pat", "quinn"]}
    p = _user(kc_sessions, "pat")
    assert p is not None and p["email"] == "pat@example.org"
    assert report.requests < 15  # only what the events named was read

    realm.admin.group_user_remove(pat, lab)
    realm.admin.update_group(lab, {"name": "lab2"})
    realm.admin.delete_user(quinn)
    report = events_sync(settings, store_engine, kc_sessions)
    assert report is not None and report.ok, report
    assert report.suspended == ["quinn"]
    assert _groups(kc_sessions) == {"lab2": []}  # renamed; pat removed, quinn deleted


def test_flattened_subgroups_members_are_members_of_the_parent(
    realm: Realm, ldap_site: Callable[..., Site], store_engine: Engine, kc_sessions: sessionmaker[Session]
) -> None:
    """keycloak.flatten_subgroups: a member of /hpc/gpu is a member of /hpc, in the store and in LDAP;
    a membership event in a subgroup reaches its parent too."""
    site = ldap_site(keycloak={"flatten_subgroups": True})
    settings = site.settings
    rae, sam = realm.add_user("rae"), realm.add_user("sam")
    hpc = realm.add_group("hpc")
    gpu = realm.add_group("gpu", parent=hpc)
    realm.admin.group_user_add(rae, gpu)

    report = full_sync(settings, store_engine, kc_sessions)
    assert report.ok and not report.group_cycles, report.as_json()
    assert _groups(kc_sessions) == {"hpc": ["rae"], "gpu": ["rae"]}
    site.converge()
    hpc_entry = site.entry(site.group_dn("hpc"))
    assert hpc_entry is not None and _members(site, hpc_entry) == ["rae"]

    realm.admin.group_user_add(sam, gpu)
    realm.admin.group_user_remove(rae, gpu)
    events = events_sync(settings, store_engine, kc_sessions)
    assert events is not None and events.ok, events
    assert _groups(kc_sessions) == {"hpc": ["sam"], "gpu": ["sam"]}
