"""One person as the SSH gateway needs them: read from the store for `sup.domain.login_pods.route`.

The gateway asks per connection attempt (with a short cache on its side), so this reads one user
row, their key fingerprints and their groups' names: three indexed queries, never the whole store.
Who is provisioned and who gets an own login pod are the desired state's and the Kubernetes
target's rules themselves (`sup.domain.desired.provisioned`, `sup.domain.login_pods.own_pod`),
applied to the person's direct memberships, as there.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.orm import Session

from sup.domain.desired import provisioned
from sup.domain.login_pods import GatewayPerson, own_pod
from sup.domain.sshkeys import printable
from sup.store.models import Group, Membership, SshKey, User


def gateway_person(
    session: Session,
    username: str,
    *,
    access_groups: Collection[str] = (),
    login_groups: Collection[str] = (),
) -> GatewayPerson | None:
    """The person called `username` (None if the store has nobody by that name).

    `access_groups`: the `access.groups` setting (empty: everyone is provisioned);
    `login_groups`: `kube.login_groups` (empty: every provisioned person gets an own pod)."""
    user = session.scalars(select(User).where(User.username == username)).one_or_none()
    if user is None:
        return None
    keys = session.execute(select(SshKey.fingerprint, SshKey.comment).where(SshKey.user_id == user.id))
    # A key a login pod leaves out (sup/targets/kube/login_files.py: stored before the API refused
    # such comments) is no key here either: the gateway and the pod agree on who may log in.
    fingerprints = frozenset(fingerprint for fingerprint, comment in keys if printable(comment))
    groups = frozenset(
        session.scalars(
            select(Group.name)
            .join(Membership, Membership.group_id == Group.id)
            .where(Membership.user_id == user.id)
        )
    )
    is_provisioned = provisioned(groups, access_groups)
    return GatewayPerson(
        username=user.username,
        active=user.active,
        provisioned=is_provisioned,
        own_pod=is_provisioned and own_pod(groups, login_groups),
        fingerprints=fingerprints,
        groups=groups,
    )
