"""The SSH CA's step before the targets plan: the CA public keys a login pod's sshd trusts travel in
the desired state (`ssh_user_ca_keys`), which the Kubernetes target renders into each login pod's
ConfigMap (`sup-ssh-ca.pub`, sup/targets/kube/login_files.py); the login image's entrypoint hands
the file to sshd as TrustedUserCAKeys. A rotation (`ssh_ca.also_trusted`) reaches every pod as a
ConfigMap change, without a restart. The key is read every pass: a replaced Secret is picked up
without restarting SUP.

Whether the pods also take people's uploaded keys (`ssh_ca.plain_keys`) is not this step's: it needs
no file and no store, only the settings, so the derivation's policy carries it (sup/domain/desired.py,
`plain_keys_in_login_pods`), for every pass, whichever steps run."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import datetime

from sqlalchemy.orm import Session

from sup.config import Settings
from sup.domain.desired import DesiredState
from sup.ssh_ca.service import SshCa
from sup.store.audit import Actor


class SshCaStep:
    """The `DesiredStep` of sup/reconcile/steps.py for the SSH CA."""

    name = "ssh_ca"

    def runs(self, settings: Settings, targets: Collection[str]) -> bool:
        """Only when SUP signs certificates and the Kubernetes target (the login pods) is in the pass."""
        return settings.ssh_ca is not None and "kube" in targets

    def act(
        self, session: Session, settings: Settings, desired: DesiredState, now: datetime, actor: Actor
    ) -> None:
        """Nothing to write."""

    def adjust(self, session: Session, settings: Settings, desired: DesiredState) -> DesiredState:
        assert settings.ssh_ca is not None  # runs() said so
        return replace(desired, ssh_user_ca_keys=tuple(SshCa(settings.ssh_ca).trusted))


SSH_CA_STEP = SshCaStep()
