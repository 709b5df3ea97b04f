"""Wake one sleeping login pod at once: its StatefulSet's `replicas` set to 1 (docs/ssh-gateway.md,
"Scale to zero").

The SSH gateway holds a person's connection open while their pod starts, so this cannot wait for a
reconcile pass. It writes `spec.replicas` alone, as a merge patch under SUP's field manager: a
server-side apply of a partial object under that manager would drop every other field it applied.
The next pass renders the same `replicas` from the store's wake state and finds nothing to change;
a pass that puts the pod to sleep applies replicas 0 forced, taking the field back. A StatefulSet
already at 1 is only read; one that does not exist yet is left to the next pass, which creates it
awake.
"""

from __future__ import annotations

from sup.targets.kube import names
from sup.targets.kube.client import KubeApiError, KubeClient
from sup.targets.kube.model import WORKLOAD
from sup.targets.kube.observe import watch_cache
from sup.targets.kube.settings import KubeSettings

AWAKE_REPLICAS = 1


class WakeError(Exception):
    """The API server could not be asked or refused: the pod is not known to be waking."""


def wake_login(settings: KubeSettings, kind: str, name: str, *, client: KubeClient | None = None) -> bool:
    """Scale the login StatefulSet of owner (`kind` user|group, `name`) to one replica. True if this
    wrote; False if it was at one already or does not exist (yet)."""
    owner = names.Owner(kind, name)
    own_client = client is None
    kube = client if client is not None else KubeClient(settings)
    try:
        current = kube.get(WORKLOAD, owner.login)
        if current is None or (current.get("spec") or {}).get("replicas") == AWAKE_REPLICAS:
            return False
        written = kube.set_replicas(
            WORKLOAD, owner.login, AWAKE_REPLICAS, field_manager=settings.field_manager
        )
    except KubeApiError as exc:
        raise WakeError(f"cannot wake StatefulSet {owner.login}: {exc.message}") from None
    finally:
        cache = watch_cache(settings)
        if cache is not None:  # a pass in this process trusts its cache once it shows this write
            cache.note_writes(kube.written, kube.deleted)
        if own_client:
            kube.close()
    return written is not None
