"""Keycloak subgroups' members as members of their parents (keycloak.flatten_subgroups).

Keycloak lists a group's direct members only. With the setting on, a user in /hpc/gpu/a100 is a
member of /hpc/gpu and /hpc too (within groups_path: a parent outside it is not a SUP group). The
flattening itself is the domain's (sup/domain/groups_flatten.py); this module feeds it the realm's
tree, both ways a sync reads memberships: whole member lists per group (a full pull, or a group event)
and the groups of single users (membership events, which name each user's direct groups only).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sup.domain.groups_flatten import flatten
from sup.sources.keycloak.reader import KcGroup, RealmSnapshot
from sup.sources.keycloak.report import Scope, SyncReport

log = logging.getLogger(__name__)


def subgroups(groups: Mapping[str, KcGroup]) -> dict[str, set[str]]:
    """Group id -> the ids of its direct subgroups, both in `groups`."""
    children: dict[str, set[str]] = {}
    for group in groups.values():
        if group.parent_id is not None and group.parent_id in groups:
            children.setdefault(group.parent_id, set()).add(group.id)
    return children


def effective_members(
    snapshot: RealmSnapshot, groups: Mapping[str, KcGroup], report: SyncReport
) -> dict[str, set[str]]:
    """Group id -> the Keycloak user ids that are members of it or of any of its subgroups, for the
    groups whose member lists were read (a parent's list is complete only when its subgroups' are:
    a sync reads every list or, from events, none)."""
    result = flatten(snapshot.members, subgroups(groups))
    _report_cycles(result.cycles, groups, report)
    return {gid: set(result.members[gid]) for gid in snapshot.members}


def effective_user_groups(
    scope: Scope, groups: Mapping[str, KcGroup], report: SyncReport
) -> dict[str, set[str]] | None:
    """User id -> every group id the user is in directly or through a subgroup."""
    if scope.user_groups is None:
        return None
    direct: dict[str, set[str]] = {}
    for user_id, group_ids in scope.user_groups.items():
        for group_id in group_ids:
            direct.setdefault(group_id, set()).add(user_id)
    result = flatten(direct, subgroups(groups))
    _report_cycles(result.cycles, groups, report)
    found: dict[str, set[str]] = {user_id: set() for user_id in scope.user_groups}
    for group_id, members in result.members.items():
        for user_id in members:
            found[user_id].add(group_id)
    return found


def _report_cycles(cycles: list[tuple[str, ...]], groups: Mapping[str, KcGroup], report: SyncReport) -> None:
    """A tree has none; should Keycloak ever answer with one, its groups share their members."""
    for cycle in cycles:
        paths = " -> ".join(groups[g].path if g in groups else g for g in cycle)
        text = f"Keycloak groups nested in a cycle ({paths}): each holds the members of all"
        if text not in report.group_cycles:
            report.group_cycles.append(text)
            log.warning("keycloak sync: %s", text)
