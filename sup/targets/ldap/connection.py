"""One ldap3 connection: bind (TLS as configured), paged searches that are complete or fail, and
pipelined writes.

The connection uses ldap3's ASYNC strategy: a write is sent at once and its result collected later,
so many writes are in flight together (see `Pipeline`); a search waits for its pages. Every search
result code is checked: ldap3 hands back a truncated paged search (size or time limit exceeded)
without raising, even with raise_exceptions=True, and a partial read must never become a plan.

The bind password is used for the bind and nowhere else; no message built here contains it.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ldap3 import (
    ASYNC,
    BASE,
    DSA,
    LEVEL,
    MODIFY_ADD,
    MODIFY_DELETE,
    MODIFY_REPLACE,
    SUBTREE,
    SYNC,
    Connection,
    Server,
    Tls,
)
from ldap3.core.exceptions import LDAPException
from ldap3.operation.unbind import unbind_operation

from sup.targets.base import ObserveError, TargetError
from sup.targets.ldap.model import ObservedEntry
from sup.targets.ldap.settings import LdapSettings

PAGED_RESULTS = "1.2.840.113556.1.4.319"
# Not in an RFC but offered by AD (not by OpenLDAP 2.5, nor in 389 Directory Server 2.3's root DSE):
# a modify that adds a value already there, or deletes one that is not, succeeds instead of failing.
PERMISSIVE_MODIFY = "1.2.840.113556.1.4.1413"

SEARCH_RESULT_ENTRY = 4  # protocolOp of a SearchResultEntry (RFC 4511 section 4.5.2)
SUCCESS = 0
LIMITS = frozenset({3, 4, 11})  # timeLimitExceeded, sizeLimitExceeded, adminLimitExceeded
# 389 Directory Server applies its size limit to each page of a paged search: page_size counts too.
LIMITS_HINT = " (check the size, look-through and time limits of the bind DN, and page_size against them)"
NO_SUCH_ATTRIBUTE = 16
ATTRIBUTE_OR_VALUE_EXISTS = 20
NO_SUCH_OBJECT = 32

SCOPES: dict[str, Literal["BASE", "LEVEL", "SUBTREE"]] = {"base": BASE, "one": LEVEL, "sub": SUBTREE}
MODIFY = {"add": MODIFY_ADD, "delete": MODIFY_DELETE, "replace": MODIFY_REPLACE}


@dataclass(frozen=True)
class Write:
    """One LDAP write. `modifications`: attribute -> [(add|delete|replace, values)]."""

    operation: str  # "add", "modify" or "delete"
    dn: str
    attributes: Mapping[str, Sequence[str]] = field(default_factory=dict)
    modifications: Mapping[str, Sequence[tuple[str, Sequence[str]]]] = field(default_factory=dict)
    permissive: bool = False


@dataclass(frozen=True)
class Outcome:
    code: int
    description: str
    message: str

    @property
    def ok(self) -> bool:
        return self.code == SUCCESS

    def __str__(self) -> str:
        text = f"{self.description} ({self.code})"
        return f"{text}: {self.message}" if self.message else text


class LdapConnection:
    """A bound connection; `searches` and `writes` count the operations sent (for tests and benchmarks)."""

    def __init__(self, settings: LdapSettings) -> None:
        self.url = settings.url
        self.page_size = settings.page_size
        self.timeout = settings.timeout_seconds
        self.searches = 0
        self.writes = 0
        tls = None
        if settings.url.startswith("ldaps://") or settings.start_tls:
            tls = Tls(validate=ssl.CERT_REQUIRED, ca_certs_file=settings.ca_file)
        server = Server(settings.url, get_info=DSA, tls=tls, connect_timeout=settings.timeout_seconds)
        self._conn = Connection(
            server,
            user=settings.bind_dn,
            password=settings.bind_password.get_secret_value(),
            client_strategy=ASYNC,
            raise_exceptions=False,
            check_names=False,
            auto_referrals=False,
            return_empty_attributes=False,
            # No receive_timeout: with it, ldap3 2.9's ASYNC receiver thread spins forever once the
            # connection is closed. Every wait has its own timeout instead (get_response below).
        )
        # An instance attribute, so only this connection is affected (ldap3 stays as it is elsewhere).
        self._conn.strategy.decode_response_fast = _lean_entries(self._conn.strategy.decode_response_fast)
        where = f"{settings.url} as {settings.bind_dn}"
        if settings.start_tls:
            _check_start_tls(server, settings.url)
        try:
            self._conn.open(read_server_info=False)
            if settings.start_tls and not self._conn.start_tls(read_server_info=False):
                raise TargetError(f"StartTLS with {settings.url} failed: {self._last_error()}")
            if not self._conn.bind(read_server_info=True):
                raise TargetError(f"cannot bind to {where}: {self._last_error()}")
        except LDAPException as exc:
            self.close()
            raise TargetError(f"cannot connect to {where}: {_describe(exc)}") from None
        except TargetError:
            self.close()
            raise
        info = server.info
        supported = {c[0] for c in (info.supported_controls or [])} if info is not None else set()
        self.permissive_modify = PERMISSIVE_MODIFY in supported

    def _last_error(self) -> str:
        result = self._conn.result or {}
        description = result.get("description") or self._conn.last_error or "no answer"
        message = result.get("message") or ""
        return f"{description}: {message}" if message else str(description)

    # --- reading -----------------------------------------------------------------------------------

    def search(
        self,
        base: str,
        scope: str,
        search_filter: str,
        attributes: Iterable[str],
        *,
        missing_ok: bool = False,
    ) -> list[ObservedEntry] | None:
        """Every entry the search matches, page by page; None if `base` does not exist and
        `missing_ok`. Anything short of a complete answer raises ObserveError."""
        entries: list[ObservedEntry] = []
        cookie: Any = None
        wanted = list(attributes)
        while True:
            try:
                message_id = self._conn.search(
                    base,
                    search_filter,
                    SCOPES[scope],
                    attributes=wanted,
                    paged_size=self.page_size,
                    paged_criticality=True,
                    paged_cookie=cookie,
                )
                response, result = self._conn.get_response(message_id, timeout=self.timeout)
            except LDAPException as exc:
                raise ObserveError(
                    f"reading {base} from {self.url} failed after {len(entries)} entries: {_describe(exc)}; "
                    "nothing is changed on a partial read"
                ) from None
            self.searches += 1
            code = result.get("result")
            if code == NO_SUCH_OBJECT and missing_ok and not entries:
                return None
            if code != SUCCESS:
                outcome = Outcome(
                    code if isinstance(code, int) else -1,
                    str(result.get("description")),
                    str(result.get("message") or ""),
                )
                hint = LIMITS_HINT if outcome.code in LIMITS else ""
                raise ObserveError(
                    f"reading {base} from {self.url} stopped after {len(entries)} entries: {outcome}; "
                    f"a partial read, so nothing is changed{hint}"
                )
            for item in response or ():
                if item.get("type") != "searchResEntry":
                    raise ObserveError(
                        f"reading {base} from {self.url}: the server referred part of the answer elsewhere "
                        f"({item.get('uri')}); SUP follows no referral and plans on no partial read"
                    )
                entries.append(_entry(item))
            cookie = result.get("controls", {}).get(PAGED_RESULTS, {}).get("value", {}).get("cookie")
            if not cookie:
                if missing_ok and not entries and not self._exists(base):
                    return None
                return entries

    def _exists(self, base: str) -> bool:
        """Whether `base` exists, by a search that is not paged: 389 Directory Server (2.3) answers a
        paged search of a missing base with success and no entries, where OpenLDAP says
        noSuchObject, so an empty paged answer alone cannot tell "missing" from "empty"."""
        try:
            message_id = self._conn.search(base, "(objectClass=*)", BASE, attributes=["1.1"])
            _, result = self._conn.get_response(message_id, timeout=self.timeout)
        except LDAPException as exc:
            raise ObserveError(f"reading {base} from {self.url} failed: {_describe(exc)}") from None
        self.searches += 1
        code = result.get("result")
        if code in (SUCCESS, NO_SUCH_OBJECT):
            return bool(code == SUCCESS)
        outcome = Outcome(
            code if isinstance(code, int) else -1,
            str(result.get("description")),
            str(result.get("message") or ""),
        )
        raise ObserveError(f"reading {base} from {self.url} failed: {outcome}; nothing is changed")

    # --- writing -----------------------------------------------------------------------------------

    def send(self, write: Write) -> int:
        """Send one write without waiting for its result; returns its message id."""
        self.writes += 1
        if write.operation == "add":
            message_id = self._conn.add(  # type: ignore[no-untyped-call]
                write.dn, attributes={k: list(v) for k, v in write.attributes.items()}
            )
        elif write.operation == "modify":
            changes = {
                attribute: [(MODIFY[how], list(values)) for how, values in operations]
                for attribute, operations in write.modifications.items()
            }
            controls = (
                [(PERMISSIVE_MODIFY, False, None)] if write.permissive and self.permissive_modify else None
            )
            message_id = self._conn.modify(write.dn, changes, controls=controls)  # type: ignore[no-untyped-call]
        elif write.operation == "delete":
            message_id = self._conn.delete(write.dn)  # type: ignore[no-untyped-call]
        else:  # pragma: no cover - Write is built in apply.py only
            raise ValueError(f"unknown write {write.operation}")
        return int(message_id)

    def outcome(self, message_id: int) -> Outcome:
        _, result = self._conn.get_response(message_id, timeout=self.timeout)
        return Outcome(
            int(result.get("result", -1)), str(result.get("description")), str(result.get("message") or "")
        )

    def close(self) -> None:
        """Unbind, and let ldap3's receiver thread finish before the socket is closed.

        ldap3 2.9's ASYNC close() closes the socket under a receiver thread that may still be
        reading it. Over TLS that thread can then read from whatever socket reuses the file
        descriptor (seen: it ate the answer to another connection's bind). So: send the unbind,
        hang up (shutdown: the descriptor stays ours, the thread's read returns), join the thread,
        then close. An unbind has no answer (RFC 4511 4.3), so nothing is lost by not waiting for
        the server to hang up first: 389 Directory Server does that only on its next 250 ms wakeup,
        which made every pass against it a quarter of a second longer.
        """
        conn = self._conn
        if conn.closed:
            return
        receiver: threading.Thread | None = getattr(conn.strategy, "receiver", None)
        with contextlib.suppress(LDAPException, OSError):
            conn.send("unbindRequest", unbind_operation(), None)  # type: ignore[no-untyped-call]
        if receiver is not None:
            if conn.socket is not None:
                with contextlib.suppress(OSError):
                    conn.socket.shutdown(socket.SHUT_RDWR)
            receiver.join(timeout=self.timeout)
        with contextlib.suppress(LDAPException, OSError):
            conn.strategy.close()


class Pipeline:
    """Writes in flight together, at most `depth` at a time; one Outcome per write, in order.

    If the connection breaks, the writes without an answer get a failed Outcome (their effect is
    unknown until the next observe) and `broken` says why; the caller stops sending.
    """

    def __init__(self, connection: LdapConnection, depth: int) -> None:
        self.connection = connection
        self.depth = depth
        self.broken: str | None = None

    def run(self, writes: Sequence[Write]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        in_flight: deque[int] = deque()
        try:
            for write in writes:
                if len(in_flight) >= self.depth:
                    outcomes.append(self.connection.outcome(in_flight.popleft()))
                in_flight.append(self.connection.send(write))
            while in_flight:
                outcomes.append(self.connection.outcome(in_flight.popleft()))
        except LDAPException as exc:
            self.broken = f"the connection to {self.connection.url} failed: {_describe(exc)}"
            lost = Outcome(-1, "unknown", f"{self.broken}; the next pass sees what happened")
            outcomes.extend([lost] * (len(writes) - len(outcomes)))
        return outcomes


def _check_start_tls(server: Server, url: str) -> None:
    """StartTLS once on a synchronous connection, so that a certificate that does not verify is a
    clear error at once: ldap3's ASYNC strategy wraps the socket in its receiver thread, where the
    same error only shows as a response timeout."""
    probe = Connection(server, client_strategy=SYNC, raise_exceptions=False, auto_referrals=False)
    try:
        probe.open(read_server_info=False)
        if not probe.start_tls(read_server_info=False):
            raise TargetError(f"StartTLS with {url} failed: {probe.last_error or probe.result}")
    except LDAPException as exc:
        raise TargetError(f"StartTLS with {url} failed: {_describe(exc)}") from None
    finally:
        with contextlib.suppress(LDAPException):
            probe.unbind()


def _lean_entries(decode: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    """ldap3's decoder, except that a search result entry becomes just its DN and its attributes
    (lower-cased name -> tuple of text values), ready for ObservedEntry.

    ldap3 builds two case-insensitive dicts per entry, one of bytes and one of decoded values, in
    the receiver thread; that was most of the time of a 20,000-entry observe. The BER decoding
    stays ldap3's. The payload layout is that of ldap3 2.9's fast decoder (pinned in pyproject).
    """

    def decode_entries_leanly(message: Any) -> dict[str, Any]:
        if message["protocolOp"] != SEARCH_RESULT_ENTRY:
            return decode(message)
        dn, attribute_list = message["payload"][0][3], message["payload"][1][3]
        attributes = {
            bytes(a[3][0][3]).decode("utf-8", "replace").lower(): tuple(
                bytes(v[3]).decode("utf-8", "replace") for v in a[3][1][3]
            )
            for a in attribute_list
        }
        return {
            "type": "searchResEntry",
            "dn": bytes(dn).decode("utf-8", "replace"),
            "attributes": attributes,
        }

    return decode_entries_leanly


def _entry(item: Mapping[str, Any]) -> ObservedEntry:
    return ObservedEntry(str(item["dn"]), item["attributes"])


def _describe(exc: LDAPException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text
