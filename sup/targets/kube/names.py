"""Object names and labels: valid DNS-1123 names for any POSIX user or group name.

A POSIX name (`^[a-z_][a-z0-9_-]*$`, at most 32 characters) is used as it is when it already is an
RFC 1123 label without `--` ("kim", "a-b", "x9"). Any other name ("_svc", "a_b", "build-", "a--b")
becomes a slug plus a hash of the exact name, joined by `---`: "a_b" -> "a-b---8c1c2f6a3e". Plain
names never contain `--`, so a plain key never equals a hashed one, and two hashed keys are equal only
if 40 bits of SHA-256 collide; the diff still refuses two owners for one name, should that happen.
(JupyterHub's KubeSpawner uses the same `---` trick for the same reason.)

Names, by owner (users and groups get different prefixes, so "login-x" is never a group's):
    user:  home-uUID (PersistentVolumeClaim: by uid, so a home survives a rename; see homes.py),
           login-KEY (StatefulSet, Service, NetworkPolicy)
    group: group-KEY (StatefulSet, Service, NetworkPolicy)
Claims made before homes were named by uid are called home-KEY (`Owner.legacy_home`) and are adopted.
A StatefulSet name must stay under 53 characters (its pods' controller-revision-hash label adds 11)
and a Service name must start with a letter: keys are at most 39 characters, prefixes are letters.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from sup.targets.kube.values import DNS_LABEL

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "sup"
USER_LABEL = "sup/user"  # the user's key, on per-user objects and their pods
GROUP_LABEL = "sup/group"  # the group's key, on per-group objects and their pods
COMPONENT_LABEL = "app.kubernetes.io/component"  # home | login | group-login
UID_LABEL = "sup/uid"  # the uid a home claim belongs to (its owner whatever their name)
USER_ANNOTATION = "sup/username"  # the exact POSIX name: labels cannot hold every one
GROUP_ANNOTATION = "sup/groupname"
HASH_ANNOTATION = "sup/applied-hash"  # hash of the configuration SUP applied last
ORPHANED_ANNOTATION = "sup/orphaned-since"  # when SUP first saw a home claim without an active user

HOME = "home"
LOGIN = "login"
GROUP_LOGIN = "group-login"

_MAX_SLUG = 26
_HASH_HEX = 10
_MAX_KEY = _MAX_SLUG + 3 + _HASH_HEX  # 39


def key(name: str) -> str:
    """The DNS-1123-safe, label-value-safe, injective key of a POSIX user or group name."""
    if len(name) <= _MAX_KEY and DNS_LABEL.fullmatch(name) and "--" not in name:
        return name
    slug = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", name.lower())).strip("-")[:_MAX_SLUG].rstrip("-")
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_HEX]
    return f"{slug or 'x'}---{digest}"


def home_claim(uid_number: int) -> str:
    """The name of the home claim SUP creates for the user with this uid."""
    return f"home-u{uid_number}"


@dataclass(frozen=True)
class Owner:
    """Whose objects these are: a user (per-user pod and home) or a group (shared pod)."""

    kind: str  # "user" | "group"
    name: str  # the exact POSIX name

    @property
    def key(self) -> str:
        return key(self.name)

    @property
    def label(self) -> str:
        return USER_LABEL if self.kind == "user" else GROUP_LABEL

    @property
    def annotation(self) -> str:
        return USER_ANNOTATION if self.kind == "user" else GROUP_ANNOTATION

    @property
    def legacy_home(self) -> str:
        """The name home claims had before they were named by uid (home-KEY): adopted, never made."""
        return f"home-{self.key}"

    @property
    def login(self) -> str:
        """StatefulSet, Service and NetworkPolicy share this name."""
        return f"login-{self.key}" if self.kind == "user" else f"group-{self.key}"

    @property
    def component(self) -> str:
        return LOGIN if self.kind == "user" else GROUP_LOGIN

    def pod_labels(self) -> dict[str, str]:
        """What selects this owner's login pod (StatefulSet selector, Service, NetworkPolicy)."""
        return {MANAGED_BY: MANAGER, COMPONENT_LABEL: self.component, self.label: self.key}
