"""The desired state: what every target should hold, as a pure function of the store and policy.

Targets never read the store. They get this, compare it with what they observe, and plan changes.
The rules that are the same for every target live here:
- who is provisioned (every user, or only members of `access.groups`);
- what a deactivated user looks like (locked: no SSH keys, the nologin shell, no memberships, no
  Slurm associations), so that "suspended" means the same thing in LDAP, Slurm and Kubernetes;
- group and account membership counts only active, provisioned users;
- whether login pods take the plain public keys people uploaded, or only certificates of SUP's CA
  (`ssh_ca.plain_keys`): a site-wide rule of who gets in, not a Kubernetes detail, so it is decided
  here and the Kubernetes target only renders it. It governs the ways in that SUP runs (the gateway,
  the login pods), not LDAP's `sshPublicKey`: the directory is read by the site's own machines
  (sss_ssh_authorizedkeys on compute nodes), whose sshd decides whether it takes plain keys
  (docs/ssh-certificates.md, "Certificates only").
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sup.domain.gecos import gecos_text
from sup.domain.login_pods import Route


@dataclass(frozen=True, slots=True)
class StoredUser:
    """A user as loaded from the store (plain data, no ORM session attached)."""

    username: str
    uid_number: int
    primary_gid: int
    display_name: str | None
    given_name: str | None
    family_name: str | None
    email: str | None
    login_shell: str
    home_directory: str
    ssh_public_keys: tuple[str, ...]
    active: bool
    groups: frozenset[str]
    default_account: str | None = None  # explicit Slurm default account, if the admin chose one
    suspended_at: datetime | None = None  # when the user was deactivated (None while active)


@dataclass(frozen=True, slots=True)
class StoredGroup:
    name: str
    gid_number: int
    description: str | None
    members: frozenset[str]
    private_for: str | None  # the user whose private group this is


@dataclass(frozen=True, slots=True)
class StoredAccount:
    name: str
    parent: str
    description: str | None
    organization: str | None
    fairshare: int | None
    qos: tuple[str, ...]
    default_qos: str | None
    partitions: tuple[str, ...]
    limits: Mapping[str, Any]
    group: str | None
    coordinators: str | None = None  # the group whose members coordinate this account


@dataclass(frozen=True)
class StoreSnapshot:
    users: tuple[StoredUser, ...]
    groups: tuple[StoredGroup, ...]
    accounts: tuple[StoredAccount, ...]


@dataclass(frozen=True)
class Policy:
    """The parts of the settings the derivation depends on."""

    nologin_shell: str = "/usr/sbin/nologin"
    access_groups: frozenset[str] = frozenset()
    # False: login pods take certificates of SUP's CA only (ssh_ca set, `ssh_ca.plain_keys: false`).
    plain_keys_in_login_pods: bool = True


@dataclass(frozen=True, slots=True)
class DesiredUser:
    username: str
    uid_number: int
    gid_number: int
    display_name: str | None
    given_name: str | None
    family_name: str | None
    email: str | None
    home_directory: str
    login_shell: str
    ssh_public_keys: tuple[str, ...]
    active: bool
    default_account: str | None = None  # explicit Slurm default account (used if they are a member)
    # When the user was deactivated (None while active, or not recorded): staged offboarding counts
    # its deadline from here (e.g. the Slurm target's `offboarding_deadline`).
    suspended_at: datetime | None = None

    @property
    def cn(self) -> str:
        """A common name for directory entries: the display name, else given + family, else the username."""
        if self.display_name:
            return self.display_name
        joined = " ".join(p for p in (self.given_name, self.family_name) if p)
        return joined or self.username

    @property
    def gecos(self) -> str:
        """The passwd comment field: the common name in ASCII, without ':' or control characters."""
        return gecos_text(self.cn, self.username)


@dataclass(frozen=True, slots=True)
class DesiredGroup:
    name: str
    gid_number: int
    description: str | None
    members: frozenset[str]
    private: bool


@dataclass(frozen=True, slots=True)
class DesiredAccount:
    name: str
    parent: str
    description: str | None
    organization: str | None
    fairshare: int | None
    qos: tuple[str, ...]
    default_qos: str | None
    partitions: tuple[str, ...]
    limits: Mapping[str, Any]
    members: frozenset[str]  # active, provisioned members of the bound group
    coordinators: frozenset[str] = frozenset()  # active, provisioned members of the coordinators group


@dataclass(frozen=True)
class DesiredState:
    users: Mapping[str, DesiredUser] = field(default_factory=dict)
    groups: Mapping[str, DesiredGroup] = field(default_factory=dict)
    accounts: Mapping[str, DesiredAccount] = field(default_factory=dict)
    # Users whose POSIX identity (uid, in the directory the nodes read) is not provisioned yet. Set by
    # the planner for a target that needs it (TargetSpec.needs): such a target creates nothing that
    # would make a node look the user up (a failed lookup is cached) until they leave this set.
    identity_pending: frozenset[str] = frozenset()
    # Login pods asleep (docs/ssh-gateway.md, "Scale to zero"): their StatefulSets get replicas 0.
    # Set by the planner from the store's wake state when `gateway.idle_seconds` is set; else empty.
    asleep: frozenset[Route] = frozenset()
    # The idle reporter's port in login pods (`gateway.idle_port`), set with `asleep` when pods may
    # sleep: the login container gets SUP_IDLE_PORT and the Service an `idle` port. None: neither.
    idle_port: int | None = None
    # The CA public keys (OpenSSH lines) whose user certificates login pods' sshd takes (ssh_ca; the
    # signing CA first). Set by the SSH CA's step (sup/ssh_ca/step.py); empty: plain keys only.
    ssh_user_ca_keys: tuple[str, ...] = ()
    # Whether login pods take people's plain public keys (`ssh_public_keys`). False (derived from
    # `ssh_ca.plain_keys: false`): no keys file in any login pod, so their sshd takes certificates
    # only; the CA keys above and the principals still reach them. Other targets ignore it.
    plain_keys_in_login_pods: bool = True

    def active_usernames(self) -> frozenset[str]:
        return frozenset(name for name, user in self.users.items() if user.active)


def provisioned(groups: Collection[str], access_groups: Collection[str]) -> bool:
    """Whether SUP provisions a person who is a direct member of `groups`: everyone, or with
    `access.groups` set, the members of those groups only."""
    return not access_groups or any(group in groups for group in access_groups)


def _provisioned(user: StoredUser, policy: Policy) -> bool:
    return provisioned(user.groups, policy.access_groups)


def derive(snapshot: StoreSnapshot, policy: Policy) -> DesiredState:
    users: dict[str, DesiredUser] = {}
    for u in snapshot.users:
        desired_user = derive_user(u, policy)
        if desired_user is not None:
            users[u.username] = desired_user
    active = frozenset(name for name, user in users.items() if user.active)
    groups: dict[str, DesiredGroup] = {}
    for g in snapshot.groups:
        desired_group = derive_group(g, users, active)
        if desired_group is not None:
            groups[g.name] = desired_group
    accounts = {a.name: derive_account(a, groups) for a in snapshot.accounts}
    return DesiredState(
        users=users,
        groups=groups,
        accounts=accounts,
        plain_keys_in_login_pods=policy.plain_keys_in_login_pods,
    )


# One object at a time: `derive` is these over the whole snapshot, and a pass scoped to a few users
# re-derives just what they touch with the same three (sup/reconcile/desired_cache.py).


def derive_user(u: StoredUser, policy: Policy) -> DesiredUser | None:
    """The user as every target should hold them, or None when SUP does not provision them."""
    if not _provisioned(u, policy):
        return None
    return DesiredUser(
        username=u.username,
        uid_number=u.uid_number,
        gid_number=u.primary_gid,
        display_name=u.display_name,
        given_name=u.given_name,
        family_name=u.family_name,
        email=u.email,
        home_directory=u.home_directory,
        login_shell=u.login_shell if u.active else policy.nologin_shell,
        ssh_public_keys=u.ssh_public_keys if u.active else (),
        active=u.active,
        default_account=u.default_account,
        suspended_at=None if u.active else u.suspended_at,
    )


NOBODY: frozenset[str] = frozenset()  # one empty member set for the many groups without members


def derive_group(
    g: StoredGroup, users: Mapping[str, DesiredUser], active: AbstractSet[str]
) -> DesiredGroup | None:
    """The group with its active, provisioned members (`users`: the provisioned ones, `active`:
    those of them active), or None for the private group of a user SUP does not provision."""
    if g.private_for is not None and g.private_for not in users:
        return None  # a private group exists exactly as long as its user is provisioned
    return DesiredGroup(
        name=g.name,
        gid_number=g.gid_number,
        description=g.description,
        members=(g.members & active) or NOBODY,
        private=g.private_for is not None,
    )


def derive_account(a: StoredAccount, groups: Mapping[str, DesiredGroup]) -> DesiredAccount:
    """The account with the active, provisioned members of its bound and coordinators groups."""

    def members_of(group: str | None) -> frozenset[str]:
        return groups[group].members if group is not None and group in groups else frozenset()

    return DesiredAccount(
        name=a.name,
        parent=a.parent,
        description=a.description,
        organization=a.organization,
        fairshare=a.fairshare,
        qos=a.qos,
        default_qos=a.default_qos,
        partitions=a.partitions,
        limits=dict(a.limits),
        members=members_of(a.group),
        coordinators=members_of(a.coordinators),
    )
