"""The Keycloak pull `sup serve` runs beside the reconciler, on the leading replica only.

Every keycloak.events_seconds (with admin_events on) it applies the realm's admin events, and every
keycloak.interval_seconds it does a full pull (the first right after this replica starts leading).
A failed pull is logged and recorded in the source state (GET /api/v1/sources/keycloak); the next one
comes on schedule. Writes mark the outbox, so the reconciler picks them up within seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy import Engine

from sup.config import Settings
from sup.errors import Conflict
from sup.sources.keycloak.runner import events_sync, full_sync
from sup.store.session import make_sessionmaker

log = logging.getLogger(__name__)


class KeycloakPuller:
    def __init__(self, settings: Settings, engine: Engine, is_leader: Callable[[], bool]) -> None:
        assert settings.keycloak is not None
        self.settings = settings
        self.engine = engine
        self.sessions = make_sessionmaker(engine)
        self.is_leader = is_leader
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_full: float | None = None
        self._next_events = 0.0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="sup-keycloak", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick(time.monotonic())
            except Exception:  # keep pulling whatever one attempt did
                log.exception("keycloak pull failed")
            self._stop.wait(1.0)

    def tick(self, now: float) -> str | None:
        """Run what is due; returns "full", "events" or None."""
        kc = self.settings.keycloak
        assert kc is not None
        if not self.is_leader():
            self._next_full = None  # a replica that (re)gains the lead starts with a full pull
            return None
        if self._next_full is None or (kc.interval_seconds > 0 and now >= self._next_full):
            self._next_full = now + (kc.interval_seconds or float("inf"))
            self._next_events = now + kc.events_seconds
            try:
                full_sync(self.settings, self.engine, self.sessions, wait=0)
            except Conflict:
                log.info("a Keycloak sync is already running; the scheduled one is skipped")
            return "full"
        if kc.admin_events and now >= self._next_events:
            self._next_events = now + kc.events_seconds
            events_sync(self.settings, self.engine, self.sessions)
            return "events"
        return None
