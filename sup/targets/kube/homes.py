"""Whose home claim is which: a home follows its owner's uid, not their name (pure).

A user's home claim is named by their uid (`home-u10001`) and labelled with it (`sup/uid`), so a
rename (API PATCH, a SCIM userName change, a Keycloak username change) keeps the same claim, data
and all: the claim's username label and annotation are updated and the login pod of the new name
mounts it. Kubernetes cannot rename a claim, so claims made before homes were named by uid
(`home-KEY`, no uid label) are adopted, not replaced: SUP keeps using such a claim under its name and
labels it with its owner's uid. The owner of a claim is, in this order:
1. its `sup/uid` label;
2. (older claims) the uid that a login workload of SUP's mounting it runs as (`runAsUser`): this
   finds a user renamed before SUP first labelled their claim;
3. (older claims) the uid of the user its `sup/username` annotation names, if SUP knows that user.
A claim whose owner's uid is active is never retired or deleted, whatever name it has.
"""

from __future__ import annotations

from collections.abc import Mapping

from sup.domain.desired import DesiredUser
from sup.targets.kube import names
from sup.targets.kube.model import PVC, WORKLOAD, Observed, ObservedObject


def labelled_uid(have: ObservedObject) -> int | None:
    text = have.labels.get(names.UID_LABEL)
    return int(text) if text is not None and text.isdigit() else None


def mounted_by_uid(observed: Observed) -> dict[str, int]:
    """Claim name -> the uid of the user login workload of SUP's that mounts it (rule 2)."""
    found: dict[str, int] = {}
    for (kind, _), have in observed.objects.items():
        if kind != WORKLOAD or have.labels.get(names.COMPONENT_LABEL) != names.LOGIN:
            continue
        uid, claims = _mounts(have)
        if uid is None:
            continue
        for claim in claims:
            found.setdefault(claim, uid)
    return found


# (object uid, resourceVersion) -> what its pod template mounts as whom: every full pass asks this of
# every login workload, and reading a pod template out of the watch cache means decoding it
# (packed.py); the answer cannot change while the resourceVersion does not. Bounded like memo.py.
_MOUNTS: dict[tuple[str, str], tuple[int | None, tuple[str, ...]]] = {}
MAX_MOUNTS = 200_000


def _mounts(have: ObservedObject) -> tuple[int | None, tuple[str, ...]]:
    key = (have.uid, have.resource_version or "")
    known = _MOUNTS.get(key) if all(key) else None
    if known is not None:
        return known
    pod = have.body.get("spec", {}).get("template", {}).get("spec", {})
    uid = (pod.get("securityContext") or {}).get("runAsUser")
    claims = tuple(
        str(claim)
        for volume in pod.get("volumes") or []
        if (claim := (volume.get("persistentVolumeClaim") or {}).get("claimName"))
    )
    found = (uid if isinstance(uid, int) else None, claims)
    if all(key):
        if len(_MOUNTS) >= MAX_MOUNTS:
            _MOUNTS.clear()
        _MOUNTS[key] = found
    return found


def owner_uid(
    have: ObservedObject, users: Mapping[str, DesiredUser], mounted: Mapping[str, int]
) -> int | None:
    """The uid whose home this claim is, or None when nothing says (see the module's rules)."""
    uid = labelled_uid(have)
    if uid is not None:
        return uid
    if have.name in mounted:
        return mounted[have.name]
    user = users.get(have.annotations.get(names.USER_ANNOTATION, ""))
    return user.uid_number if user is not None else None


def assign_claims(users: Mapping[str, DesiredUser], observed: Observed) -> dict[int, str]:
    """uid -> the name of the claim that is that user's home, for every user in `users`: an
    existing claim of theirs (the one named by their uid first, then one their login workload
    mounts, then by name), else the name of the claim to create (`home-uUID`)."""
    mounted = mounted_by_uid(observed)
    candidates: dict[int, list[str]] = {}
    for (kind, name), have in observed.objects.items():
        if kind != PVC:
            continue
        uid = owner_uid(have, users, mounted)
        if uid is not None:
            candidates.setdefault(uid, []).append(name)
    claims: dict[int, str] = {}
    for user in users.values():
        uid = user.uid_number
        canonical = names.home_claim(uid)
        found = candidates.get(uid, [])
        claims[uid] = min(found, key=lambda n: (n != canonical, mounted.get(n) != uid, n), default=canonical)
    return claims
