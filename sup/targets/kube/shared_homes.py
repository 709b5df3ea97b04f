"""The shared home mode (`kube.home_mode: shared`): where in the shared volume a person's home is (pure).

The site's ReadWriteMany claim (`kube.shared_home_claim`) holds the home root (`kube.home_root`, e.g.
/home) as the compute nodes mount it. A login pod mounts that claim with `subPath` = the person's home
relative to the root (`/home/alice` -> `alice`) at the home itself, so the pod sees its person's
directory and nothing else of the volume, at the same path a job sees it. A home that does not lie
strictly below the root has no place in the volume: its person gets no login pod (diff.py reports
it), never a mount of some other directory. `sup homes serve` makes the directories with the same
rule.
"""

from __future__ import annotations

from sup.domain.homes import InvalidHome, check_home


def home_root(path: str) -> str:
    """`path` if it can be the home root: absolute, plain components (as a home's), not `/`."""
    if path == "/":
        raise ValueError("must not be /: it is the directory the shared volume is mounted at, below /")
    try:
        check_home(path, "/")
    except InvalidHome as exc:
        raise ValueError(str(exc).replace("(accounts.home_template)", "")) from None
    return path


def subpath(home: str, root: str) -> str:
    """The home's path inside the shared volume (`/home/a/alice`, root `/home` -> `a/alice`).
    ValueError saying why when it has none: not strictly below `root`, or not a plain path."""
    try:
        check_home(home, root)
    except InvalidHome as exc:
        raise ValueError(
            f"home {home} cannot be mounted from the shared home volume: it "
            + str(exc).replace("(accounts.home_template)", "(kube.home_root)")
        ) from None
    return home[len(root) :].lstrip("/")
