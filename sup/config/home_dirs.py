"""The home directory maker (settings key `home_dirs`; docs/homes.md): `sup homes serve` and `sup homes
sync --once`, the small privileged process that makes each person's directory on the shared home
filesystem when `kube.home_mode` is `shared`.

Absent (the default): nothing reads it. It runs apart from SUP (its own Deployment, ServiceAccount and
settings file): it needs no database and no target section, only where the shared volume is mounted,
which path on the compute nodes that volume is, and the namespace whose login ConfigMaps say who
needs a home.
"""

from __future__ import annotations

import posixpath
import re
from typing import Literal

from pydantic import Field, field_validator

from sup.common.sections import Section

_UNITS = {"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50}
_UNITS |= {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
_QUANTITY = re.compile(r"^([1-9][0-9]{0,15})(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def quantity_bytes(text: str) -> int:
    """A Kubernetes-style size ("10Gi", "500M", "1073741824") in bytes; ValueError otherwise."""
    found = _QUANTITY.match(text)
    if found is None:
        raise ValueError(f"{text!r} is not a size such as 10Gi, 500Mi or 1T")
    return int(found.group(1)) * _UNITS[found.group(2) or ""]


def _absolute(value: str, what: str) -> str:
    if not value.startswith("/") or posixpath.normpath(value) != value or "\\" in value:
        raise ValueError(f"{what} must be an absolute, normalized path (no '..', '.', '//' or trailing '/')")
    return value


class HomeDirsSettings(Section):
    """The home directory maker (settings key `home_dirs`; docs/homes.md, "Settings"), read only by
    `sup homes serve` and `sup homes sync --once`, the maker of `kube.home_mode: shared`, from its
    own settings file (the chart renders it from values `homes:`); `sup serve` ignores it. It makes
    each person's directory on the shared home filesystem."""

    namespace: str = Field(
        description="the users' namespace (the chart: kube.namespace): the login ConfigMaps of SUP's are "
        "read there"
    )
    kubeconfig: str | None = Field(
        None, description="kubeconfig file; absent: the in-cluster service account (running in a pod)"
    )
    context: str | None = Field(None, description="kubeconfig context; default: its current context")
    mount: str = Field(
        "/srv/homes", description="where the shared home volume is mounted, whole, in the maker"
    )
    home_root: str = Field(
        "/home",
        description="the same volume's path on the compute nodes (kube.home_root): a home directory "
        "/home/alice is made at <mount>/alice",
    )
    quota: Literal["none", "xfs"] = Field(
        "none", description="xfs: an XFS project quota per home (project id = uid); none: no limit"
    )
    size: str = Field("10Gi", description="with quota xfs: each home's hard block limit")
    resync_seconds: float = Field(
        300,
        ge=1,
        le=86400,
        description="a full pass this often besides the watch's (it repairs drift; the watch is renewed "
        "then)",
    )
    timeout_seconds: int = Field(30, ge=1, le=600, description="per-request timeout to the API server")
    metrics_port: int | None = Field(
        9103, ge=1, le=65535, description="Prometheus /metrics of `sup homes serve`; null: not served"
    )

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not _DNS_LABEL.match(value):
            raise ValueError("must be a DNS label (RFC 1123): lowercase letters, digits and '-'")
        return value

    @field_validator("mount")
    @classmethod
    def _mount(cls, value: str) -> str:
        _absolute(value, "mount")
        if value == "/":
            raise ValueError("mount may not be / (the shared volume is mounted in a directory of its own)")
        return value

    @field_validator("home_root")
    @classmethod
    def _home_root(cls, value: str) -> str:
        return _absolute(value, "home_root")

    @field_validator("size")
    @classmethod
    def _size(cls, value: str) -> str:
        quantity_bytes(value)
        return value

    @property
    def size_bytes(self) -> int:
        return quantity_bytes(self.size)
