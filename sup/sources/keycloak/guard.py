"""The Keycloak sync's mass-suspension guard: a full read that would suspend more users than
reconcile.max_suspensions (or the share max_suspension_share) of the active Keycloak users changes
nothing unless forced, so a realm that suddenly returns nobody (a wrong realm, an emptied database)
does not suspend the cluster. (Forced, the reconciler's own guard still stops it reaching the
targets.)

Suspensions that trickle in, a few per pull, are stopped by the reconcile budgets over a time
window (`reconcile.suspension_budget`, sup/domain/guards.py `budget_refusal`): they count once, on
each target, when the reconciler applies them, whichever source wrote them."""

from __future__ import annotations

from sup.config import Settings
from sup.domain.guards import too_many_suspensions
from sup.sources.keycloak.reader import RealmSnapshot
from sup.sources.keycloak.report import Scope
from sup.store.models import User


def leaving(user_by_kc: dict[str, User], snapshot: RealmSnapshot, scope: Scope) -> set[str]:
    """Usernames of active Keycloak users this sync would suspend (disabled or gone)."""
    found = set()
    for kc_id, user in user_by_kc.items():
        if not user.active:
            continue
        if scope.users is not None and kc_id not in scope.users:
            continue
        kc = snapshot.users.get(kc_id)
        if kc is None or not kc.enabled:
            found.add(user.username)
    return found


def refusal(
    settings: Settings, user_by_kc: dict[str, User], snapshot: RealmSnapshot, scope: Scope
) -> str | None:
    """Why this sync must not run (too many suspensions), or None."""
    going = leaving(user_by_kc, snapshot, scope)
    active = sum(1 for u in user_by_kc.values() if u.active)
    if not too_many_suspensions(len(going), active, settings.reconcile):
        return None
    return (
        f"Keycloak's answer would suspend {len(going)} of the {active} active Keycloak users "
        f"({', '.join(sorted(going)[:5])}{', ...' if len(going) > 5 else ''}), over "
        f"reconcile.max_suspensions={settings.reconcile.max_suspensions} or max_suspension_share="
        f"{settings.reconcile.max_suspension_share:g}; nothing was changed. Check the realm, then "
        "run `sup sync keycloak --force` if it is right"
    )
