"""Desired state vs one complete read of the namespace -> the Changes that make them equal (pure).

Per active user: a home claim, and a login StatefulSet with its Service and NetworkPolicy. Per group
in `group_pods`: a shared login StatefulSet, Service and NetworkPolicy. Then:
- a wanted object that is missing is created; one whose name an object SUP did not create holds is
  not (a `report` with an error, for that user; the user's workload waits for its claim and policy);
- a wanted object that differs in a field SUP sets (drift.py), or whose applied-hash annotation is
  not the hash of what SUP would apply now (settings or templates changed), is updated;
- a claim is never shrunk (a larger claim keeps its size) and its immutable fields (storage class,
  access modes) are never changed: a difference there is reported, the rest still applied. A claim
  grows only once it is Bound (the API server refuses to resize an unbound one);
- SUP's workloads, Services and NetworkPolicies nobody wants any more are deleted (a deactivated
  user's, a removed group pod's); a home claim whose user is no longer active is marked with the time
  SUP first saw that (`sup/orphaned-since`) and deleted once `pvc_retention` has passed (never with
  `keep`); a user who comes back before that gets the same claim back, unmarked. Home claims follow
  the uid (homes.py): a renamed user keeps theirs, and a claim whose owner's uid is active is never
  retired, whatever its name; in a scoped pass a claim whose owner was not read is left alone;
- in the shared home mode (`home_mode: shared`, shared_homes.py) there is no claim per person: a
  login pod mounts its person's directory of the site's shared claim, which must exist (else every
  login workload waits, reported); a person whose home has no place in it is reported and gets no
  login objects (existing ones stay as they are); home claims from the claim mode are never marked,
  retired or deleted (an active owner's is reported, as a reminder of the files it holds);
- an object being deleted (deletionTimestamp set) is left alone; if it is wanted, that is reported;
- a login pod stuck (CrashLoopBackOff, ...) on an outdated template is deleted, so that its
  StatefulSet recreates it from the current one (pods.py: an `update` of kind `pod`);
- a login Service that must become headless (clusterIP None), or stop being headless (a site moving
  to NodePort), cannot be changed in place (clusterIP is immutable): it is deleted and created again
  (an `update` with `recreate`). Established TCP connections through its old ClusterIP are kept by
  the node's connection tracking (kube-proxy removes no TCP conntrack entry); new ones reach the pod
  once the new Service's name resolves (the gateway retries until then): at most one reconnect.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from sup.domain.desired import DesiredState, DesiredUser
from sup.domain.login_pods import Route, login_pods
from sup.targets.base import CREATE, DELETE, REPORT, UPDATE, Change
from sup.targets.kube import names
from sup.targets.kube.drift import differences
from sup.targets.kube.homes import assign_claims, mounted_by_uid, owner_uid
from sup.targets.kube.login_files import MAX_BYTES, Directory, LoginFiles
from sup.targets.kube.memo import VERIFIED
from sup.targets.kube.model import (
    API_KIND,
    LOGIN_CONFIG,
    NETWORK_POLICY,
    PVC,
    SERVICE,
    WORKLOAD,
    KubeChange,
    Manifest,
    NewObject,
    NotWritten,
    ObjectDelete,
    ObjectUpdate,
    Observed,
    ObservedObject,
    OrphanMark,
    Remark,
    Wanted,
    login_keys,
    user_object_keys,
)
from sup.targets.kube.pods import replacements
from sup.targets.kube.render import Renderer
from sup.targets.kube.settings import KubeSettings
from sup.targets.kube.shared_homes import subpath
from sup.targets.kube.values import InvalidValue, parse_quantity, parse_retention

TARGET = "kube"
_ACTION_ORDER = {CREATE: 0, UPDATE: 1, DELETE: 2, REPORT: 3}
# creates and updates: the claim and the policy before the pod; deletes: the pod first
_KIND_ORDER = {PVC: 0, NETWORK_POLICY: 1, LOGIN_CONFIG: 2, SERVICE: 3, WORKLOAD: 4}
_DELETE_ORDER = {WORKLOAD: 0, SERVICE: 1, NETWORK_POLICY: 2, LOGIN_CONFIG: 3, PVC: 4}


def plan(
    desired: DesiredState,
    observed: Observed,
    renderer: Renderer,
    settings: KubeSettings,
    now: datetime.datetime,
    *,
    include_group_pods: bool = True,
) -> list[KubeChange]:
    """`include_group_pods`: False in a pass scoped to some users (target.py), which read only their
    objects: a group pod's were not read, so planning it would create what exists, and one whose
    members' pods it does not involve (spec.py, `can_scope`) is left to the next full pass."""
    changes: list[KubeChange] = []
    refused: set[tuple[str, str]] = set()
    group_pods = settings.group_pods if include_group_pods else []
    pods = login_pods(desired, settings.login_groups, group_pods)
    # For this target an active user without an own pod (outside `login_groups`) is as one
    # suspended: no login objects, the home claim kept as `pvc_retention` says.
    logins = frozenset(pod.name for pod in pods if pod.kind == "user")
    wanted = _wanted(desired, pods, group_pods, observed, renderer, settings, changes, refused)
    _shared_claim_missing(observed, renderer, changes, refused)
    blocked = _blocked(wanted, observed, settings.namespace, changes, refused)
    for key, item in wanted.items():
        if key in blocked or item.verified is not None:
            continue
        have = observed.objects.get(key)
        if have is None:
            changes.append(_create(item, settings.namespace))
        elif have.terminating:
            reason = (
                f"{_describe(item.kind, item.name)} is being deleted; SUP creates it again once it is gone"
            )
            changes.append(Change(TARGET, REPORT, item.kind, item.name, Remark(reason), item.subject))
        else:
            found = _update(item, have, settings)
            changes.extend(found)
            version = have.resource_version
            if not found and item.inputs is not None and version is not None:
                VERIFIED.remember((settings.namespace, *key), item.inputs, version, item.needed)
    if not observed.scoped:
        VERIFIED.retain(settings.namespace, observed.objects.keys())
    retention = parse_retention(settings.pvc_retention)
    mounted = mounted_by_uid(observed)
    uids = {user.uid_number: user for user in desired.users.values()}
    for key, have in observed.objects.items():
        if key in wanted or key in refused or have.terminating:
            continue  # a login ConfigMap SUP refused to write stays as it is (its pod keeps it)
        if have.kind == PVC:
            uid = owner_uid(have, desired.users, mounted)
            owner = uids.get(uid) if uid is not None else None
            if settings.home_mode == "shared":
                changes.extend(_claim_kept(have, owner, logins))
            elif owner is not None and owner.active and owner.username in logins:
                reason = (
                    f"another home claim of uid {uid} (user {owner.username}); SUP mounts the one it "
                    "chose and keeps this one"
                )
                changes.append(Change(TARGET, REPORT, PVC, have.name, Remark(reason), owner.username))
            elif owner is not None or not observed.scoped:
                changes.extend(_retire_claim(have, retention, now, settings.namespace))
        else:
            changes.append(_delete(have, "not wanted: its user or group is no longer active or provisioned"))
    changing = {(c.kind, c.name) for c in changes if c.action in (CREATE, UPDATE)}
    usable = wanted.keys() - blocked
    changes.extend(
        replacements(observed.pods.values(), observed.objects, usable, changing, settings.namespace)
    )
    return sorted(changes, key=_order)


def _order(change: KubeChange) -> tuple[int, int, str, str]:
    kinds = _DELETE_ORDER if change.action == DELETE else _KIND_ORDER
    return (_ACTION_ORDER[change.action], kinds.get(change.kind, 9), change.name, str(change.subject))


# --- what the desired state calls for -------------------------------------------------------------


def _wanted(
    desired: DesiredState,
    pods: frozenset[Route],
    group_pods: list[str],
    observed: Observed,
    renderer: Renderer,
    settings: KubeSettings,
    changes: list[KubeChange],
    refused: set[tuple[str, str]],
) -> dict[tuple[str, str], Wanted]:
    """`pods`: the login pods SUP keeps (`sup.domain.login_pods.login_pods`); `group_pods`: the
    groups whose shared pods to plan; `refused`: gets the keys of login ConfigMaps SUP will not write
    (their workloads wait)."""
    items: list[Wanted] = []
    shared = renderer.shared_claim is not None
    claims = {} if shared else assign_claims(desired.users, observed)
    directory = Directory(desired)
    for name in sorted(desired.users):
        user = desired.users[name]
        if Route("user", name) in pods:
            if not renderer.mountable(user):
                _unmountable(user, settings, changes, refused)
                continue
            claim = claims.get(user.uid_number, "")
            groups = directory.supplemental_gids(user)
            asleep = Route("user", name) in desired.asleep
            items.extend(
                _user_objects(
                    user, claim, groups, observed, renderer, settings.namespace, asleep, desired.idle_port
                )
            )
            owner = names.Owner("user", user.username)
            files = directory.files([user])
            items.extend(_login_config(owner, files, observed, renderer, changes, refused))
    for group_name in group_pods:
        group = desired.groups.get(group_name)
        if group is None or Route("group", group_name) not in pods:
            reason = (
                f"group {group_name} in kube.group_pods is not a group SUP provisions; it gets no login pod"
            )
            changes.append(Change(TARGET, REPORT, WORKLOAD, group_name, Remark(reason)))
            continue
        members = [desired.users[m] for m in sorted(group.members) if m in desired.users]
        pod = names.Owner("group", group.name).login
        for member in members:
            if not renderer.mountable(member):
                error = f"{_home_error(member, settings)}; it is not mounted in the login pod {pod}"
                changes.append(Change(TARGET, REPORT, WORKLOAD, pod, NotWritten(error), member.username))
        asleep = Route("group", group.name) in desired.asleep
        items.extend(renderer.group_login(group, members, claims, asleep=asleep, idle_port=desired.idle_port))
        owner = names.Owner("group", group.name)
        files = directory.files(members)
        items.extend(_login_config(owner, files, observed, renderer, changes, refused))
    wanted: dict[tuple[str, str], Wanted] = {}
    clashes: dict[tuple[str, str], list[Wanted]] = {}
    for item in items:
        key = (item.kind, item.name)
        if key in wanted and wanted[key].owner != item.owner:
            clashes.setdefault(key, [wanted[key]]).append(item)
        wanted[key] = item
    for key, owners in clashes.items():  # only on a hash collision: refuse rather than share
        del wanted[key]
        who = " and ".join(f"{o.owner.kind} {o.owner.name}" for o in owners)
        for item in owners:
            error = f"{who} would share the name {item.name}; SUP writes neither"
            changes.append(Change(TARGET, REPORT, item.kind, item.name, NotWritten(error), item.subject))
    return wanted


def _user_objects(
    user: DesiredUser,
    claim: str,
    groups: tuple[int, ...],
    observed: Observed,
    renderer: Renderer,
    namespace: str,
    asleep: bool = False,
    idle_port: int | None = None,
) -> list[Wanted]:
    """A user's home claim (named `claim`) and login objects: rendered, or, when the memo has every
    one of them in sync with the same inputs at the resourceVersion just read, taken as they are.
    `asleep`: the login pod sleeps (its StatefulSet has replicas 0); `idle_port`: the idle
    reporter's port (pods may sleep)."""
    owner = names.Owner("user", user.username)
    shared = renderer.shared_claim is not None  # the shared home mode: no claim of the user's own
    inputs = renderer.user_inputs(user, claim, groups, asleep=asleep, idle_port=idle_port)
    remembered = []
    for kind, name in user_object_keys(owner, None if shared else claim):
        have = observed.objects.get((kind, name))
        needs_ = VERIFIED.verified((namespace, kind, name), inputs, have.resource_version if have else None)
        if needs_ is None:
            break
        remembered.append(Wanted.in_sync(kind, owner, inputs, needs_, claim if kind == PVC else ""))
    else:
        return remembered
    logins = renderer.user_login(user, claim, groups, asleep=asleep, idle_port=idle_port)
    rendered = logins if shared else [renderer.home(user, claim), *logins]
    return [replace(w, inputs=inputs) for w in rendered]


def _home_error(user: DesiredUser, settings: KubeSettings) -> str:
    """Why the user's home has no place in the shared volume (for one `Renderer.mountable` refused)."""
    try:
        subpath(user.home_directory, settings.home_root)
    except ValueError as exc:
        return f"user {user.username}: {exc}"
    return f"user {user.username}: home {user.home_directory} has no place in the shared home volume"


def _unmountable(
    user: DesiredUser, settings: KubeSettings, changes: list[KubeChange], refused: set[tuple[str, str]]
) -> None:
    """A user whose home has no place in the shared volume: reported; no login object of theirs is
    written, and existing ones are left as they are (a wrong home_root must not cut every session)."""
    owner = names.Owner("user", user.username)
    error = f"{_home_error(user, settings)}; SUP writes no login pod for them"
    changes.append(Change(TARGET, REPORT, WORKLOAD, owner.login, NotWritten(error), user.username))
    refused.update(login_keys(owner))


def _login_config(
    owner: names.Owner,
    files: LoginFiles,
    observed: Observed,
    renderer: Renderer,
    changes: list[KubeChange],
    refused: set[tuple[str, str]],
) -> list[Wanted]:
    """The login ConfigMap of `owner`'s pod: from the memo when it was found in sync with the same
    files at the resourceVersion just read, else built. People whose passwd line would break are
    reported (and left out); so are keys a pod does not write, and on a group pod the largest key
    sets that would take the ConfigMap over its limit. A ConfigMap too big to store even so (a
    user's own, or a group's without any keys) is not written, and its pod waits."""
    subject = owner.name if owner.kind == "user" else None
    if owner.kind == "group":  # one member's keys must not freeze everyone's
        files = files.within(MAX_BYTES)
    for person, reason in sorted((*files.refused.items(), *files.keys_left_out.items())):
        changes.append(Change(TARGET, REPORT, LOGIN_CONFIG, owner.login, NotWritten(reason), person))
    if owner.kind == "user" and owner.name in files.refused:
        refused.add((LOGIN_CONFIG, owner.login))
        return []
    if files.size > MAX_BYTES:
        error = (
            f"the login files of {owner.kind} {owner.name} take {files.size} bytes, more than a "
            f"ConfigMap holds ({MAX_BYTES}); SUP does not write ConfigMap {owner.login}"
        )
        changes.append(Change(TARGET, REPORT, LOGIN_CONFIG, owner.login, NotWritten(error), subject))
        refused.add((LOGIN_CONFIG, owner.login))
        return []
    key = (LOGIN_CONFIG, owner.login)
    inputs = renderer.login_config_inputs(owner, files)
    have = observed.objects.get(key)
    namespace = renderer.namespace
    needs_ = VERIFIED.verified((namespace, *key), inputs, have.resource_version if have else None)
    if needs_ is not None:
        return [Wanted.in_sync(LOGIN_CONFIG, owner, inputs, needs_)]
    return [renderer.login_config(owner, files)]


def _shared_claim_missing(
    observed: Observed, renderer: Renderer, changes: list[KubeChange], refused: set[tuple[str, str]]
) -> None:
    """In the shared home mode, a full read without the site's shared claim: reported, and every
    login workload waits for it (a scoped read does not list claims, and cannot tell)."""
    claim = renderer.shared_claim
    if claim is None or observed.scoped:
        return
    key = (PVC, claim)
    if key in observed.objects or key in observed.foreign:
        return
    error = (
        f"kube.shared_home_claim {claim} is not a PersistentVolumeClaim in namespace "
        f"{renderer.namespace}: no login pod is created or changed until the site makes it"
    )
    changes.append(Change(TARGET, REPORT, PVC, claim, NotWritten(error)))
    refused.add(key)


def _blocked(
    wanted: Mapping[tuple[str, str], Wanted],
    observed: Observed,
    namespace: str,
    changes: list[KubeChange],
    refused: set[tuple[str, str]],
) -> set[tuple[str, str]]:
    """Wanted objects whose name an object SUP did not create holds, and the workloads that need
    them or a login ConfigMap SUP refused to write (a pod never runs without its NetworkPolicy and
    login files, nor mounts a claim that is not SUP's)."""
    blocked: set[tuple[str, str]] = set(refused)
    for key, item in wanted.items():
        if key in observed.foreign and key not in observed.objects:
            blocked.add(key)
            error = (
                f"{_describe(item.kind, item.name)} already exists in namespace {namespace} and SUP did "
                "not create it; SUP leaves it alone and does not create its own"
            )
            changes.append(Change(TARGET, REPORT, item.kind, item.name, NotWritten(error), item.subject))
    for key, item in wanted.items():
        if item.kind != WORKLOAD or key in blocked:
            continue
        missing = [n for n in item.needed if n in blocked]
        if missing:
            blocked.add(key)
            what = " and ".join(_describe(kind, name) for kind, name in missing)
            error = f"not created: {what} is missing or cannot be written (see above)"
            changes.append(Change(TARGET, REPORT, item.kind, item.name, NotWritten(error), item.subject))
    return blocked


# --- creates and updates ---------------------------------------------------------------------------


def applied_hash(manifest: Manifest) -> str:
    """A short hash of what SUP applies (without the hash itself): it changes exactly when SUP's
    intent does, which is how fields SUP stopped setting are noticed."""
    body = json.loads(json.dumps(manifest))
    body["metadata"].get("annotations", {}).pop(names.HASH_ANNOTATION, None)
    spec = body.get("spec")
    if body.get("kind") == "StatefulSet" and isinstance(spec, dict) and spec.get("replicas") == 0:
        # A login pod asleep (docs/ssh-gateway.md) is the same intent as awake: falling asleep or
        # waking is a change of `replicas` (which the field comparison sees), not of settings, and
        # the hash stays the one SUP applied before pods could sleep.
        spec["replicas"] = 1
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _with_hash(manifest: Manifest) -> Manifest:
    manifest["metadata"].setdefault("annotations", {})[names.HASH_ANNOTATION] = applied_hash(manifest)
    return manifest


def _describe(kind: str, name: str) -> str:
    return f"{API_KIND[kind]} {name}"


def summary(kind: str, manifest: Manifest) -> dict[str, Any]:
    """The few fields a person checks in a plan, by kind."""
    spec = manifest.get("spec", {})
    if kind == PVC:
        return {
            "size": spec.get("resources", {}).get("requests", {}).get("storage"),
            "storage_class": spec.get("storageClassName"),
            "access_modes": spec.get("accessModes"),
        }
    if kind == WORKLOAD:
        pod = spec.get("template", {}).get("spec", {})
        container = (pod.get("containers") or [{}])[0]
        limits = container.get("resources", {}).get("limits", {})
        security = pod.get("securityContext", {})
        return {
            "image": container.get("image"),
            "cpu": limits.get("cpu"),
            "memory": limits.get("memory"),
            "run_as_user": security.get("runAsUser"),
        }
    if kind == SERVICE:
        return {"type": spec.get("type"), "ports": [p.get("port") for p in spec.get("ports", [])]}
    if kind == LOGIN_CONFIG:
        data = manifest.get("data") or {}
        return {
            "people": len((data.get("passwd") or "").splitlines()),
            "groups": len((data.get("group") or "").splitlines()),
            "keys": sum(len(v.splitlines()) for k, v in data.items() if k.endswith(".keys")),
        }
    ingress = spec.get("ingress") or []
    sources = [peer.get("ipBlock", {}).get("cidr") for rule in ingress for peer in rule.get("from", [])]
    return {"ssh_from": sources or "nobody", "egress_rules": len(spec.get("egress") or [])}


def _create(item: Wanted, namespace: str) -> KubeChange:
    manifest = _with_hash(item.manifest)
    details = NewObject(_describe(item.kind, item.name), namespace, summary(item.kind, manifest), manifest)
    return Change(TARGET, CREATE, item.kind, item.name, details, item.subject)


def _storage(body: Mapping[str, Any]) -> str | None:
    value = body.get("spec", {}).get("resources", {}).get("requests", {}).get("storage")
    return None if value is None else str(value)


def _claim_adjustments(
    item: Wanted, manifest: Manifest, have: ObservedObject, changes: list[KubeChange]
) -> None:
    """Never shrink a claim, never touch its immutable fields, grow it only once it is bound:
    `manifest` (the item's) is changed to match."""
    spec = manifest["spec"]
    have_spec = have.body.get("spec", {})
    for field in ("storageClassName", "accessModes"):
        # a field SUP does not set (the default class filled in at creation) is not SUP's to compare
        if field in spec and spec[field] != have_spec.get(field):
            have_value = have_spec.get(field)
            reason = (
                f"{field} is {have_value if have_value is not None else 'unset'} and cannot change on an "
                f"existing claim (the settings say {spec[field]}); the claim keeps it"
            )
            changes.append(Change(TARGET, REPORT, PVC, item.name, Remark(reason), item.subject))
            if have_value is None:
                del spec[field]
            else:
                spec[field] = have_value
    want_size, have_size = _storage(manifest), _storage(have.body)
    if want_size is None or have_size is None:
        return
    try:
        want_bytes, have_bytes = parse_quantity(want_size), parse_quantity(have_size)
    except InvalidValue:
        return
    requests = spec["resources"]["requests"]
    if want_bytes < have_bytes:
        requests["storage"] = have_size  # never shrink
    elif want_bytes > have_bytes and have.body.get("status", {}).get("phase") != "Bound":
        requests["storage"] = have_size
        reason = f"grows from {have_size} to {want_size} once the claim is bound"
        changes.append(Change(TARGET, REPORT, PVC, item.name, Remark(reason), item.subject))


_RECREATE_REASON = (
    "a Service's clusterIP cannot change once set: SUP deletes it and creates it again "
    "(a held session is kept; a new one may need one retry)"
)


def _headless(body: Mapping[str, Any]) -> bool:
    return (body.get("spec") or {}).get("clusterIP") == "None"


def _recreated(kind: str, manifest: Manifest, have: ObservedObject) -> bool:
    """Whether the object must be deleted and created again to match: a Service that must become
    headless (login Services of type ClusterIP: no ClusterIP allocated per person) or stop being
    headless (NodePort and LoadBalancer need a ClusterIP). The API server refuses to change
    spec.clusterIP in either direction."""
    return kind == SERVICE and _headless(manifest) != _headless(have.body)


def _update(item: Wanted, have: ObservedObject, settings: KubeSettings) -> list[KubeChange]:
    changes: list[KubeChange] = []
    manifest = item.manifest
    if item.kind == PVC:
        _claim_adjustments(item, manifest, have, changes)
    manifest = _with_hash(manifest)
    # items of a list carry no apiVersion and kind; the name and namespace are the key already
    found = differences({k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}, have.body)
    hash_path = f"metadata.annotations.{names.HASH_ANNOTATION}"
    hash_changed = found.pop(hash_path, None) is not None
    recreate = _recreated(item.kind, manifest, have)
    if found or hash_changed or recreate:
        reason = None
        if recreate:
            reason = _RECREATE_REASON
        elif not found:
            reason = "SUP's settings or templates changed: fields SUP no longer sets are removed"
        elif have.labels.get(names.MANAGED_BY) != names.MANAGER:
            reason = "SUP's labels were removed by hand"
        what = _describe(item.kind, item.name)
        update = ObjectUpdate(what, settings.namespace, found, reason, have.uid, manifest, recreate)
        changes.append(Change(TARGET, UPDATE, item.kind, item.name, update, item.subject))
    orphaned = have.annotations.get(names.ORPHANED_ANNOTATION)
    if item.kind == PVC and orphaned is not None:
        reason = f"user {item.owner.name} is active again: the claim is kept and unmarked"
        unmark = OrphanMark(_describe(PVC, item.name), settings.namespace, orphaned, None, reason, have.uid)
        changes.append(Change(TARGET, UPDATE, PVC, item.name, unmark, item.subject))
    return changes


# --- what nobody wants any more --------------------------------------------------------------------


def owner_of(have: ObservedObject) -> str | None:
    """The username of a per-user object (from SUP's annotation), else None."""
    return have.annotations.get(names.USER_ANNOTATION)


def _delete(have: ObservedObject, reason: str) -> KubeChange:
    details = ObjectDelete(f"{API_KIND[have.kind]} {have.name}", reason, have.uid)
    return Change(TARGET, DELETE, have.kind, have.name, details, owner_of(have))


def format_time(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime.datetime | None:
    try:
        moment = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None
    return moment.replace(tzinfo=datetime.UTC)


def _claim_kept(have: ObservedObject, owner: DesiredUser | None, logins: frozenset[str]) -> list[KubeChange]:
    """The shared home mode never marks, retires or deletes a home claim: it holds a person's files
    from the claim mode, which only a person may move to the shared home. Its active owner's claim
    is reported (a reminder); the others are left as they are."""
    if owner is None or not owner.active or owner.username not in logins:
        return []
    reason = (
        f"kube.home_mode is shared: home claim {have.name} of user {owner.username} (uid "
        f"{owner.uid_number}) is no longer mounted; SUP keeps it and its files (copy what they need "
        "into their shared home, then delete the claim by hand)"
    )
    return [Change(TARGET, REPORT, PVC, have.name, Remark(reason), owner.username)]


def _retire_claim(
    have: ObservedObject, retention: datetime.timedelta | None, now: datetime.datetime, namespace: str
) -> Iterable[KubeChange]:
    """A home claim without an active user: mark when that was first seen; delete after retention."""
    if retention is not None and retention.total_seconds() == 0:
        return [_delete(have, "its user is no longer active and kube.pvc_retention is 0s")]
    marked = have.annotations.get(names.ORPHANED_ANNOTATION)
    since = parse_time(marked) if marked is not None else None
    if since is None:
        reason = "its user is no longer active; the claim is kept " + (
            "for ever (pvc_retention: keep)" if retention is None else f"for {retention}"
        )
        mark = OrphanMark(
            f"{API_KIND[PVC]} {have.name}", namespace, marked, format_time(now), reason, have.uid
        )
        return [Change(TARGET, UPDATE, PVC, have.name, mark, owner_of(have))]
    if retention is not None and now - since >= retention:
        return [_delete(have, f"its user has not been active since {marked}; pvc_retention is {retention}")]
    return []
