"""The audit stream (`audit_out`): the audit log shipped as JSON lines to a file (or stdout) and to an
HTTP endpoint, for a SIEM. docs/operations.md, "Audit stream"."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, SecretStr, model_validator

from sup.common.sections import Section
from sup.config.api import url_problem


class AuditFileSink(Section):
    """Append every audit entry to a file as one JSON object per line (settings key `audit_out.file`)."""

    path: str = Field(
        description="the file appended to (created if missing; fsync'd after each batch); `-` or "
        "`stdout`: standard output (`sup serve`'s own, beside its logs on stderr)",
        examples=["/var/log/sup/audit.jsonl"],
    )


class AuditWebhookSink(Section):
    """POST the audit entries to an HTTP endpoint (settings key `audit_out.webhook`): each request's
    body is up to `batch_size` entries, one JSON object per line (`application/x-ndjson`). Any 2xx
    answer delivers the batch; anything else (an error status, a timeout, no connection) is retried
    with exponential backoff and jitter, and the stream waits: no entry is skipped or dropped."""

    # A refused section's error never quotes what it was given (the token is in it).
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    url: str = Field(description="where the batches are POSTed", examples=["https://siem.example.org/ingest"])
    token: SecretStr | None = Field(
        None, description="sent as `token_header: token_prefix + token`; never logged or shown in errors"
    )
    token_header: str = Field("Authorization", min_length=1, description="the header that carries `token`")
    token_prefix: str = Field("Bearer ", description="put before `token` in that header")
    batch_size: int = Field(100, ge=1, le=10000, description="entries per request at most")
    timeout_seconds: float = Field(10, gt=0, le=300, description="per-request timeout")
    attempts: int = Field(
        5,
        ge=1,
        le=100,
        description="tries per batch in one shipping pass (the backoff between them: retry_seconds, "
        "doubled each time up to retry_max_seconds, with jitter); past them the pass ends and the next "
        "pass tries again: the cursor only moves once the endpoint accepted the batch",
    )
    retry_seconds: float = Field(1, gt=0, le=600, description="the first wait before a retry")
    retry_max_seconds: float = Field(60, gt=0, le=3600, description="the longest wait between retries")
    verify_tls: bool = Field(True, description="verify the endpoint's TLS certificate")
    ca_file: str | None = Field(
        None, description="CA certificates (PEM) for the endpoint; default: the system's"
    )
    allow_insecure_http: bool = Field(
        False,
        description="true: accept a plain-http url (a collector on loopback or in the pod), never across a "
        "network: the entries and the token would travel in clear; otherwise https only",
    )

    @model_validator(mode="after")
    def _https_only(self) -> AuditWebhookSink:
        problem = self.url_problem(self.url)
        if problem is not None:
            raise ValueError(f"audit_out.webhook.url: {problem}")
        return self

    def url_problem(self, url: str) -> str | None:
        """Why SUP will not send the audit log to `url` (None: it will): https only, plain http
        only with allow_insecure_http."""
        return url_problem(
            url,
            self.allow_insecure_http,
            "audit_out.webhook.allow_insecure_http: true (SUP_AUDIT_OUT__WEBHOOK__ALLOW_INSECURE_HTTP=true)",
            risk="the audit entries and the token would travel in clear",
            where="a collector on loopback",
        )


class AuditOutSettings(Section):
    """The audit stream (settings key `audit_out`; absent: off). `sup serve` (where the reconciler
    runs; one replica at a time) ships every audit entry, in order, to each sink configured, at least
    once: a sink's cursor moves only after it took a batch, so a restart or an outage resumes where
    it stopped. `sup audit ship --once` does one pass by hand. Each line: id, at (RFC 3339, UTC),
    actor, action, resource_type, resource_name, before, after, request_id."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)  # the webhook's token

    file: AuditFileSink | None = Field(None, description="the file sink; absent: none")
    webhook: AuditWebhookSink | None = Field(None, description="the HTTP sink; absent: none")
    interval_seconds: float = Field(
        5, ge=0.1, le=3600, description="how often `sup serve` looks for new entries to ship"
    )
    start: Literal["beginning", "end"] = Field(
        "beginning",
        description="where a sink that has never shipped starts: `beginning` (the whole audit log) or "
        "`end` (only entries written from then on)",
    )

    @model_validator(mode="after")
    def _some_sink(self) -> AuditOutSettings:
        if self.file is None and self.webhook is None:
            raise ValueError("audit_out needs a sink: audit_out.file, audit_out.webhook or both")
        return self
