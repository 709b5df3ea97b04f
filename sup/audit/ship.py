"""The audit stream: audit entries shipped, in id order, to the sinks of settings `audit_out` (a file or
stdout, an HTTP endpoint) as one JSON object per line, for a SIEM.

At least once, in order, per sink: each sink has a cursor in the store (`audit_cursor`, the id of the
last entry it accepted), moved only after the sink took a batch (the file written and fsync'd; a 2xx
from the endpoint). A crash between the delivery and the cursor's move delivers that batch again
(the `id` tells a reader it has seen it). A sink that fails keeps its cursor: the next pass sends the
same entries again; the other sinks go on. One process ships at a time (the `audit-out` lock: every
replica's `sup serve`, and `sup audit ship`, try it and skip the pass while another holds it).

Ids in order are not commits in order on PostgreSQL: a transaction may take id 10, then another
takes 11 and commits first. A pass that sees 11 but not 10 ships only up to the gap, then waits
(briefly, under a lock that lets no new writer start) for the writers still open to finish: a gap
that remains afterwards is an id a rolled-back transaction took, never to come, and is passed over.
SQLite has one writer at a time, so an id never shows before a smaller one commits.
"""

from __future__ import annotations

import json
import logging
import os
import random
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Protocol

from sqlalchemy import Engine, func, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from sup.config import AuditFileSink, AuditOutSettings, AuditWebhookSink
from sup.store.locks import LockTimeout, exclusive
from sup.store.models import AuditCursor, AuditEntry, utcnow
from sup.store.session import make_sessionmaker

log = logging.getLogger(__name__)

LOCK = "audit-out"
FILE_BATCH = 1000
# How long a pass that meets a gap in the ids waits for the writers still open (PostgreSQL); new
# writes wait behind it meanwhile, so it is short. Past it, the pass ships up to the gap only.
GAP_WAIT = "2s"


def entry_json(entry: AuditEntry) -> dict[str, Any]:
    """One audit entry as the stream carries it."""
    at = entry.at.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    return {
        "id": entry.id,
        "at": at,
        "actor": entry.actor,
        "action": entry.action,
        "resource_type": entry.resource_type,
        "resource_name": entry.resource_name,
        "before": entry.before,
        "after": entry.after,
        "request_id": entry.request_id,
    }


def entry_line(entry: AuditEntry) -> str:
    return json.dumps(entry_json(entry), ensure_ascii=False, separators=(",", ":"))


class DeliveryFailed(Exception):
    """A sink did not take a batch; the message says why and holds no secret."""


@dataclass(frozen=True)
class Batch:
    first: int
    last: int
    lines: list[str]


class Sink(Protocol):
    name: str
    batch_size: int

    def deliver(self, batch: Batch) -> None:
        """Take the batch durably, or raise DeliveryFailed."""

    def close(self) -> None: ...


class FileSink:
    """Appends lines to a file (fsync'd after each batch) or writes them to stdout (flushed)."""

    name = "file"
    batch_size = FILE_BATCH

    def __init__(self, settings: AuditFileSink) -> None:
        self.path = settings.path
        self.stdout = settings.path in ("-", "stdout")

    def deliver(self, batch: Batch) -> None:
        data = "".join(line + "\n" for line in batch.lines)
        if self.stdout:
            try:
                sys.stdout.write(data)
                sys.stdout.flush()
            except (OSError, ValueError) as exc:
                raise DeliveryFailed(f"cannot write to stdout: {type(exc).__name__}") from None
            return
        try:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            raise DeliveryFailed(f"cannot append to {self.path}: {why}") from None

    def close(self) -> None:
        pass


class WebhookSink:
    """POSTs each batch (lines of JSON, `application/x-ndjson`); a 2xx delivers it. Anything else is
    tried again, up to `attempts` times per pass, with exponential backoff and full jitter. A client
    error (4xx but 408 and 429) will most likely not heal by itself (a wrong url or token): it is
    logged as an error, and still retried, so that nothing is dropped while it gets fixed. Neither
    the url (it may hold a key) nor the token is ever logged or put in an error."""

    name = "webhook"

    def __init__(self, settings: AuditWebhookSink, sleep: Callable[[float], Any] = time.sleep) -> None:
        self.settings = settings
        self.batch_size = settings.batch_size
        self.sleep = sleep
        self.headers = {"Content-Type": "application/x-ndjson"}
        if settings.token is not None:
            self.headers[settings.token_header] = settings.token_prefix + settings.token.get_secret_value()
        context = ssl.create_default_context(cafile=settings.ca_file)
        if not settings.verify_tls and settings.ca_file is None:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        # Redirects are not followed: a 3xx is an answer that did not take the batch.
        self.opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), _NoRedirect())

    def deliver(self, batch: Batch) -> None:
        body = "".join(line + "\n" for line in batch.lines).encode()
        attempts = self.settings.attempts
        for attempt in range(1, attempts + 1):
            problem, retry_after = self._post(body)
            if problem is None:
                return
            level = logging.ERROR if problem.startswith("refused") else logging.WARNING
            log.log(
                level,
                "audit webhook: entries %d to %d not delivered (attempt %d of %d): %s",
                batch.first,
                batch.last,
                attempt,
                attempts,
                problem,
            )
            if attempt == attempts:
                raise DeliveryFailed(problem)
            if self.sleep(self._backoff(attempt, retry_after)) is True:  # an Event's wait: stopping
                raise DeliveryFailed(f"{problem} (stopped before the next attempt)")
        raise AssertionError("unreachable")  # pragma: no cover

    def _post(self, body: bytes) -> tuple[str | None, float | None]:
        """(None, None) when delivered; else what went wrong and the Retry-After asked for, if any."""
        request = urllib.request.Request(  # noqa: S310 (https, or http when allowed: the settings check)
            self.settings.url, data=body, headers=self.headers, method="POST"
        )
        try:
            with self.opener.open(request, timeout=self.settings.timeout_seconds) as response:
                status, retry_after = response.status, None
        except urllib.error.HTTPError as exc:
            status, retry_after = exc.code, _seconds(exc.headers.get("Retry-After"))
            exc.close()
        except (OSError, ValueError) as exc:  # no connection, a timeout, TLS
            return f"no answer ({type(exc).__name__})", None
        if 200 <= status < 300:
            return None, None
        if 400 <= status < 500 and status not in (408, 429):
            return f"refused with HTTP {status}: check audit_out.webhook (url, token); retrying", retry_after
        return f"HTTP {status}", retry_after

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Full jitter over retry_seconds * 2^(attempt-1), at most retry_max_seconds; at least what
        the endpoint asked for with Retry-After (within retry_max_seconds)."""
        ceiling = min(self.settings.retry_max_seconds, self.settings.retry_seconds * 2 ** (attempt - 1))
        wait = random.uniform(ceiling / 2, ceiling)  # noqa: S311 (jitter, not a secret)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.settings.retry_max_seconds))
        return wait

    def close(self) -> None:
        pass


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def make_sinks(settings: AuditOutSettings, sleep: Callable[[float], Any] = time.sleep) -> list[Sink]:
    sinks: list[Sink] = []
    if settings.file is not None:
        sinks.append(FileSink(settings.file))
    if settings.webhook is not None:
        sinks.append(WebhookSink(settings.webhook, sleep))
    return sinks


@dataclass
class ShipReport:
    """What one pass did: entries delivered per sink, and each sink that failed, with why."""

    delivered: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


class AuditShipper:
    def __init__(
        self,
        settings: AuditOutSettings,
        engine: Engine,
        *,
        sinks: Sequence[Sink] | None = None,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.sessions: sessionmaker[Session] = make_sessionmaker(engine)
        self.sinks = list(sinks) if sinks is not None else make_sinks(settings, sleep)

    def ship(self, *, wait: float = 0.0, stop: Callable[[], bool] = lambda: False) -> ShipReport:
        """One pass: every sink gets the entries after its cursor, batch by batch, until none is
        left, it fails, or `stop()`. Raises LockTimeout when another process is shipping (after
        `wait` seconds)."""
        report = ShipReport()
        with exclusive(self.engine, LOCK, timeout=wait):
            for sink in self.sinks:
                delivered = 0
                try:
                    cursor = self._cursor(sink.name)
                    while not stop():
                        batch = self._next(cursor, sink.batch_size)
                        if batch is None:
                            break
                        sink.deliver(batch)
                        self._advance(sink.name, batch.last)
                        cursor = batch.last
                        delivered += len(batch.lines)
                except DeliveryFailed as exc:
                    report.failed[sink.name] = str(exc)
                report.delivered[sink.name] = delivered
        return report

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()

    # --- the cursors -------------------------------------------------------------------------------

    def _cursor(self, sink: str) -> int:
        """The id after which `sink` ships; a sink that never shipped starts as `audit_out.start` says
        (from then on fixed in the store)."""
        with self.sessions.begin() as session:
            row = session.get(AuditCursor, sink)
            if row is not None:
                return row.last_id
            start = 0
            if self.settings.start == "end":
                start = session.scalar(select(func.max(AuditEntry.id))) or 0
            session.add(AuditCursor(sink=sink, last_id=start, updated_at=utcnow()))
            return start

    def _advance(self, sink: str, last_id: int) -> None:
        with self.sessions.begin() as session:
            row = session.get(AuditCursor, sink)
            if row is None:
                session.add(AuditCursor(sink=sink, last_id=last_id, updated_at=utcnow()))
            else:
                row.last_id = last_id
                row.updated_at = utcnow()

    # --- reading -----------------------------------------------------------------------------------

    def _next(self, cursor: int, limit: int) -> Batch | None:
        """The next entries after `cursor`, in id order, as far as they are settled (above)."""
        with self.sessions() as session:
            rows = _after(session, cursor, limit)
        if self.engine.dialect.name == "postgresql":
            settled = _contiguous(rows, cursor)
            if len(settled) < len(rows):
                rows = self._after_open_writers(cursor, limit) or settled
        if not rows:
            return None
        return Batch(rows[0].id, rows[-1].id, [entry_line(row) for row in rows])

    def _after_open_writers(self, cursor: int, limit: int) -> list[AuditEntry] | None:
        """Read again once every transaction writing the audit log has ended (PostgreSQL: a SHARE
        lock waits for them and lets no new one start); None if they take longer than GAP_WAIT."""
        try:
            with self.sessions.begin() as session:
                session.execute(text(f"SET LOCAL lock_timeout = '{GAP_WAIT}'"))
                session.execute(text("LOCK TABLE audit_log IN SHARE MODE"))
                return _after(session, cursor, limit)
        except OperationalError:
            log.info("audit stream: writers still open behind a gap in the audit ids; shipping up to it")
            return None


def _after(session: Session, cursor: int, limit: int) -> list[AuditEntry]:
    query = select(AuditEntry).where(AuditEntry.id > cursor).order_by(AuditEntry.id).limit(limit)
    return list(session.scalars(query))


def _contiguous(rows: list[AuditEntry], cursor: int) -> list[AuditEntry]:
    """The leading rows whose ids follow `cursor` without a gap."""
    settled: list[AuditEntry] = []
    expected = cursor + 1
    for row in rows:
        if row.id != expected:
            break
        settled.append(row)
        expected += 1
    return settled


class AuditStream:
    """`sup serve`'s shipping thread: a pass every `interval_seconds`; after a failed one, the next
    comes later and later (doubling, up to the webhook's retry_max_seconds or a minute)."""

    def __init__(self, settings: AuditOutSettings, engine: Engine) -> None:
        self.settings = settings
        self._stop = threading.Event()
        self.shipper = AuditShipper(settings, engine, sleep=self._stop.wait)
        self._thread: threading.Thread | None = None
        self._failures = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="sup-audit-out", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.shipper.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._stop.wait(self.tick())

    def tick(self) -> float:
        """One pass; returns the seconds until the next."""
        try:
            report = self.shipper.ship(stop=self._stop.is_set)
        except LockTimeout:
            return self.settings.interval_seconds  # another process ships
        except Exception:  # the store is away, say: keep trying
            log.exception("audit stream: a pass failed")
            report = ShipReport(failed={"store": "error"})
        for sink, problem in report.failed.items():
            log.warning("audit stream: sink %s is behind: %s", sink, problem)
        if not report.failed:
            self._failures = 0
            return self.settings.interval_seconds
        self._failures += 1
        ceiling = self.settings.webhook.retry_max_seconds if self.settings.webhook is not None else 60.0
        backoff: float = self.settings.interval_seconds * 2.0 ** min(self._failures, 16)
        return min(ceiling, backoff)
