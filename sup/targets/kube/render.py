"""Jinja2 templates -> manifests: the objects the desired state calls for (pure).

The shipped templates live beside this module (sup/targets/kube/templates/, package data of the
wheel); a file of the same name in `kube.templates_dir` replaces the shipped one. Every value a
template interpolates goes through `tojson`, so no name, path or setting can change the document's
structure. The shipped templates are JSON (also valid YAML) because it parses ten times faster;
overrides may be any YAML. What a template may read is typed: template_values.py, the templates'
interface. After rendering, SUP sets what it relies on, whatever the template says: the name, the
labels that observe selects on, the annotation naming the owner, and for login workloads the
selector and pod labels that the Service and NetworkPolicy select. A template that fails, does not
parse, or renders another kind is a TemplateError naming the file: the pass stops for this target
and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

import jinja2
import yaml

from sup.domain.desired import DesiredGroup, DesiredUser
from sup.targets.kube import names
from sup.targets.kube.login_files import LoginFiles
from sup.targets.kube.model import LOGIN_CONFIG, NETWORK_POLICY, PVC, SERVICE, WORKLOAD, Manifest, Wanted
from sup.targets.kube.settings import KubeSettings
from sup.targets.kube.shared_homes import subpath
from sup.targets.kube.template_values import (
    GroupName,
    GroupValues,
    Member,
    NetworkBlocks,
    ObjectNames,
    OwnerValues,
    Person,
    TemplateContext,
    TemplateSettings,
    UserValues,
    template_json,
)

HOME_PVC = "home-pvc.yaml.j2"
USER_WORKLOAD = "user-statefulset.yaml.j2"
GROUP_WORKLOAD = "group-statefulset.yaml.j2"
SERVICE_TEMPLATE = "service.yaml.j2"
NETWORK_POLICY_TEMPLATE = "networkpolicy.yaml.j2"

_EXPECTED = {
    PVC: ("v1", "PersistentVolumeClaim"),
    WORKLOAD: ("apps/v1", "StatefulSet"),
    SERVICE: ("v1", "Service"),
    NETWORK_POLICY: ("networking.k8s.io/v1", "NetworkPolicy"),
}

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster


class TemplateError(Exception):
    """A template that cannot produce a valid object; the message names the file and the reason."""


def shipped_templates() -> Path:
    """The directory of the shipped templates, inside the package (a wheel installs it alongside)."""
    return Path(__file__).resolve().parent / "templates"


class Renderer:
    def __init__(self, settings: KubeSettings) -> None:
        search = [str(shipped_templates())]
        if settings.templates_dir:
            override = Path(settings.templates_dir)
            if not override.is_dir():
                raise TemplateError(f"kube.templates_dir {override} is not a directory")
            search.insert(0, str(override))
        self.environment = jinja2.Environment(
            loader=jinja2.FileSystemLoader(search),
            undefined=jinja2.StrictUndefined,
            autoescape=False,  # noqa: S701 - YAML, not HTML; values go through tojson
            keep_trailing_newline=True,
        )
        self.environment.filters["pull_secret"] = lambda name: {"name": name}
        # `| tojson` of a typed value (template_values.py) writes the JSON it stands for
        self.environment.policies["json.dumps_kwargs"] = {"sort_keys": True, "default": template_json}
        self.settings = settings
        self.namespace = settings.namespace
        self.values = TemplateSettings.of(settings)
        self.network = NetworkBlocks.of(settings)
        self.fingerprint = _fingerprint(settings, search)
        # the site's claim that every login pod mounts a directory of (home_mode shared), else None
        self.shared_claim = settings.shared_home_claim if settings.home_mode == "shared" else None

    def sub_path(self, user: DesiredUser) -> str | None:
        """The user's home inside the shared claim (shared_homes.py), None in the claim mode.
        ValueError when their home has no place in it (see `mountable`)."""
        if self.shared_claim is None:
            return None
        return subpath(user.home_directory, self.settings.home_root)

    def mountable(self, user: DesiredUser) -> bool:
        """Whether the user's home can be mounted: always in the claim mode; in the shared mode only
        a home strictly below kube.home_root (the diff reports the others and renders no pod)."""
        try:
            self.sub_path(user)
        except ValueError:
            return False
        return True

    def user_inputs(
        self,
        user: DesiredUser,
        claim: str,
        groups: tuple[int, ...] = (),
        *,
        asleep: bool = False,
        idle_port: int | None = None,
    ) -> Hashable:
        """Everything a user's objects are rendered from (the memo's key, memo.py)."""
        return (self.fingerprint, user, claim, groups, asleep, idle_port)

    # --- per user and per group ------------------------------------------------------------------

    def home(self, user: DesiredUser, claim: str | None = None) -> Wanted:
        """The user's home claim, named `claim` (homes.py; by default the one named by their uid)."""
        owner = names.Owner("user", user.username)
        claim = claim or names.home_claim(user.uid_number)
        subject = UserValues(Person.of(user))
        return self._render(PVC, HOME_PVC, owner, subject, names.HOME, claim=claim, uid=user.uid_number)

    def user_login(
        self,
        user: DesiredUser,
        claim: str | None = None,
        groups: tuple[int, ...] = (),
        *,
        asleep: bool = False,
        idle_port: int | None = None,
    ) -> list[Wanted]:
        """The login StatefulSet, mounting the home claim `claim`, its Service and NetworkPolicy.
        `groups`: the gids of the user's other groups (the pod's supplementalGroups); `asleep`: the
        pod sleeps (replicas 0; docs/ssh-gateway.md, "Scale to zero"); `idle_port`: the idle
        reporter's port when pods may sleep (env SUP_IDLE_PORT, the Service's `idle` port)."""
        owner = names.Owner("user", user.username)
        claim = self.shared_claim or claim or names.home_claim(user.uid_number)
        subject = UserValues(Person.of(user, groups, self.sub_path(user)))
        component = names.LOGIN
        return [
            self._render(
                NETWORK_POLICY, NETWORK_POLICY_TEMPLATE, owner, subject, component, claim, idle_port
            ),
            self._render(SERVICE, SERVICE_TEMPLATE, owner, subject, component, claim, idle_port),
            self._render(WORKLOAD, USER_WORKLOAD, owner, subject, component, claim, idle_port, asleep=asleep),
        ]

    def group_login(
        self,
        group: DesiredGroup,
        members: Iterable[DesiredUser],
        claims: Mapping[int, str] | None = None,
        *,
        asleep: bool = False,
        idle_port: int | None = None,
    ) -> list[Wanted]:
        """`claims`: uid -> home claim name (homes.py), for the members' homes; `asleep`: replicas 0;
        `idle_port`: as for `user_login`. In the shared home mode each member's directory of the
        shared claim is mounted at their home (a member whose home has no place in it is left out:
        the diff reports them)."""
        owner = names.Owner("group", group.name)
        claims = claims or {}
        people = sorted(members, key=lambda m: m.username)
        if self.shared_claim is not None:  # only members whose home has a place in the volume
            people = [m for m in people if self.mountable(m)]
        listed = tuple(
            Member.of_member(
                m,
                claim=self.shared_claim or claims.get(m.uid_number) or names.home_claim(m.uid_number),
                home_sub_path=self.sub_path(m),
            )
            for m in people
        )
        subject = GroupValues(GroupName.of(group), listed, self.shared_claim)
        component = names.GROUP_LOGIN
        return [
            self._render(NETWORK_POLICY, NETWORK_POLICY_TEMPLATE, owner, subject, component, "", idle_port),
            self._render(SERVICE, SERVICE_TEMPLATE, owner, subject, component, "", idle_port),
            self._render(WORKLOAD, GROUP_WORKLOAD, owner, subject, component, "", idle_port, asleep=asleep),
        ]

    def login_config(self, owner: names.Owner, files: LoginFiles) -> Wanted:
        """The login pod's ConfigMap (login_files.py): built here, not from a template, with the
        same name, labels and annotation rules as the pod's other objects."""
        manifest: Manifest = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {},
            "data": dict(files.data),
        }
        _own(manifest, LOGIN_CONFIG, owner, owner.component, self.namespace, "", None)
        return Wanted.rendered(LOGIN_CONFIG, owner, manifest, self.login_config_inputs(owner, files))

    def login_config_inputs(self, owner: names.Owner, files: LoginFiles) -> Hashable:
        """What a login ConfigMap is built from (the memo's key): not the settings or templates."""
        return (self.namespace, owner, files.digest())

    # --- rendering ---------------------------------------------------------------------------------

    def _render(
        self,
        kind: str,
        template: str,
        owner: names.Owner,
        subject: UserValues | GroupValues,
        component: str,
        claim: str = "",
        idle_port: int | None = None,
        *,
        uid: int | None = None,
        asleep: bool = False,
    ) -> Wanted:
        """`asleep`: a login StatefulSet of a pod that sleeps gets no replica; an awake one keeps the
        template's (1). Only `replicas` changes: the pod template, and so the pod woken later, is
        the same."""
        context = TemplateContext(
            namespace=self.namespace,
            owner=OwnerValues.of(owner),
            names=ObjectNames(home=claim or owner.legacy_home, login=owner.login, key=owner.key),
            pod_labels=owner.pod_labels(),
            settings=self.values,
            network=self.network,
            idle_port=idle_port,
            subject=subject,
        )
        try:
            text = self.environment.get_template(template).render(context.variables())
        except jinja2.TemplateError as exc:
            where = (
                f"{template}, line {exc.lineno}" if isinstance(exc, jinja2.TemplateSyntaxError) else template
            )
            raise TemplateError(f"template {where}: {exc}") from None
        try:
            manifest = _parse(text)
        except yaml.YAMLError as exc:
            raise TemplateError(
                f"template {template} did not render valid YAML for {owner.name}: {exc}"
            ) from None
        api_version, api_kind = _EXPECTED[kind]
        if not isinstance(manifest, dict) or (manifest.get("apiVersion"), manifest.get("kind")) != (
            api_version,
            api_kind,
        ):
            raise TemplateError(f"template {template} must render one {api_version} {api_kind}")
        manifest = _prune(manifest)
        if asleep:
            manifest.setdefault("spec", {})["replicas"] = 0
        _own(manifest, kind, owner, component, self.namespace, claim, uid)
        if kind == WORKLOAD and self.shared_claim is not None:
            _check_shared_mounts(template, manifest, self.shared_claim, subject.people)
        return Wanted.rendered(kind, owner, manifest, claim=claim if kind == PVC else "")


def _fingerprint(settings: KubeSettings, search: list[str]) -> str:
    """A hash of what rendering depends on besides the user: the settings and every template text."""
    digest = hashlib.sha256(settings.model_dump_json().encode())
    for directory in search:
        for path in sorted(Path(directory).rglob("*")):
            if path.is_file():
                digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _parse(text: str) -> Any:
    """The shipped templates render JSON (which is YAML too): json parses it ~10x faster than YAML,
    which matters for a thousand users a pass. Anything else (an operator's YAML) goes to YAML."""
    try:
        return json.loads(text)
    except ValueError:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader


def _prune(value: Any) -> Any:
    """Drop null values (a template's empty `key:`): applying a null would mean something else."""
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune(v) for v in value if v is not None]
    return value


def _own(
    manifest: Manifest,
    kind: str,
    owner: names.Owner,
    component: str,
    namespace: str,
    claim: str,
    uid: int | None,
) -> None:
    """Set what SUP relies on, whatever the template said (a home claim: its name and uid label)."""
    metadata = manifest.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        raise TemplateError(f"the {kind} template's metadata must be a mapping")
    metadata["name"] = claim if kind == PVC else owner.login
    metadata["namespace"] = namespace
    labels = metadata.get("labels") or {}
    labels.update({names.MANAGED_BY: names.MANAGER, names.COMPONENT_LABEL: component, owner.label: owner.key})
    if kind == PVC and uid is not None:
        labels[names.UID_LABEL] = str(uid)
    metadata["labels"] = labels
    annotations = metadata.get("annotations") or {}
    annotations[owner.annotation] = owner.name
    metadata["annotations"] = annotations
    if kind == WORKLOAD:
        spec = manifest.setdefault("spec", {})
        pod_labels = owner.pod_labels()
        spec["selector"] = {"matchLabels": pod_labels}
        template = spec.setdefault("template", {})
        template_meta = template.setdefault("metadata", {})
        template_meta["labels"] = {**(template_meta.get("labels") or {}), **pod_labels}


def _check_shared_mounts(template: str, manifest: Manifest, claim: str, people: Iterable[Person]) -> None:
    """A login pod of the shared home mode sees its people's directories of the shared claim and
    nothing else of it, whatever an operator's template says: every mount of the claim has the
    subPath of one of the pod's people (never the whole volume, never subPathExpr), and the pod
    sets no fsGroup (the kubelet would re-own the whole volume, everyone's homes, to that group)."""
    allowed = {person.home_sub_path for person in people}
    pod = manifest.get("spec", {}).get("template", {}).get("spec", {})
    if "fsGroup" in (pod.get("securityContext") or {}):
        raise TemplateError(
            f"template {template} sets fsGroup: in the shared home mode the kubelet would change the "
            f"group of everything in claim {claim}; leave it out"
        )
    volumes = {
        v.get("name")
        for v in pod.get("volumes") or []
        if (v.get("persistentVolumeClaim") or {}).get("claimName") == claim
    }
    for container in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
        for mount in container.get("volumeMounts") or []:
            if mount.get("name") not in volumes:
                continue
            if mount.get("subPathExpr") or mount.get("subPath") not in allowed:
                raise TemplateError(
                    f"template {template} mounts claim {claim} at {mount.get('mountPath')} with subPath "
                    f"{mount.get('subPath') or mount.get('subPathExpr') or '(none)'}: in the shared home "
                    "mode a login pod mounts only its people's own directories (user.home_sub_path)"
                )
