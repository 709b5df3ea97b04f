"""Logging for `sup serve`: one JSON object per line (or plain text), each with the request id.

The request id is the one RequestIdMiddleware takes from X-Request-ID or makes; it is kept in a
context variable for the request's task, so every record logged while handling the request (by SUP,
SQLAlchemy, uvicorn's access log) carries it, and the same id is in the answer's X-Request-ID header,
in every problem+json body and in the audit log.

Secrets: SUP never logs one on purpose (settings hold them as SecretStr; tokens are stored hashed).
`redact` is the second line of defence: whatever a library puts in a message, a bearer token, a SUP
token, a password in a URL or an `X-password=...`-style pair, or a private key block is masked before
the record is written.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal

request_id_var: ContextVar[str | None] = ContextVar("sup_request_id", default=None)

# In this order, the most structured first: a pattern that masks part of a match of a later one
# must come after it ("Bearer" before a URL or a PEM block would mask the scheme or the BEGIN line,
# and the password or key would then go unmasked).
_SECRETS = (
    # PEM private keys (an SSH or TLS private key pasted where a public key belongs)
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S),
        "[REDACTED PRIVATE KEY]",
    ),
    # scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+@"), r"\1[REDACTED]@"),
    # Authorization: Bearer xxx / Basic xxx
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 [REDACTED]"),
    # SUP's own tokens (sup/domain/tokens.py: "sup_" + url-safe base64)
    (re.compile(r"\bsup_[A-Za-z0-9_-]{16,}"), "sup_[REDACTED]"),
    # password=..., client_secret: ..., "bind_password": "..."
    (
        re.compile(r"""(?i)((?:password|passwd|secret|token|credential)s?["']?\s*[=:]\s*["']?)[^\s"',}&]+"""),
        r"\1[REDACTED]",
    ),
)


def redact(text: str) -> str:
    """`text` with anything that looks like a secret masked."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:  # a caller may name it (extra=...)
            record.request_id = request_id_var.get()
        return True


class JsonFormatter(logging.Formatter):
    """{"time", "level", "logger", "message", "request_id", ["exception"]} on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, "request_id", None) is None:
            record.request_id = "-"
        return redact(super().format(record))


def configure(fmt: Literal["json", "text"], level: str = "info") -> None:
    """Send every logger (uvicorn's included: run it with log_config=None) to stderr in `fmt`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_RequestIdFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
