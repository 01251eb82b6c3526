"""What one request did, gathered as it runs and read once at its end by the metrics, the access
log, the span and the spend.

The middleware creates it (`RECORD` in `gateway.http.app_keys`). Who and what the request is are
written as soon as each is known, so that a refusal at any later step keeps them: the caller's
metadata once the headers are read, the key once authenticated, the deployment once routed. At the
end the middleware adds what the response's own headers say (the deployment that answered,
attempts, candidates skipped, cache status, overhead). The stages that know more call its methods:
the first streamed byte, token usage, time on the upstream, guardrail verdicts, a rate limit or a
spent budget, an error sent after a stream's 200. Nothing here is written per chunk.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.api.response_headers import (
    ATTEMPTS,
    CACHE_STATUS,
    DEPLOYMENT,
    OVERHEAD_MS,
    PROVIDER,
    SKIPPED,
    parse_skipped,
)

GUARDRAILS_HEADER = "x-gateway-guardrails"
CACHE_STATUSES = {"HIT": "hit", "MISS": "miss", "REFRESH": "refresh", "BYPASS": "bypass"}


@dataclass(frozen=True, slots=True)
class GuardrailVerdict:
    policy: str  # the policy's name in config.yaml
    stage: str  # input | output
    check: str  # the check's type: pii, regex, ...
    verdict: str  # pass | deny | redact | flag | skipped | error


@dataclass(slots=True)
class RequestRecord:
    request_id: str
    method: str
    path: str
    started: float = field(default_factory=time.perf_counter)
    completion: bool = False  # a completion request: counted in the request series
    api: str = ""  # the client API called, completions or chat (the `api` label and log field); "": neither
    status: int = 0
    duration_s: float = 0.0
    ended_at: float = 0.0  # wall clock (time.time) when the answer ended: the access line's `ts`
    deployment: str = ""  # once routed: the first candidate; at the end, the one that answered
    provider: str = ""
    stream: bool = False
    cache_status: str = ""  # hit | miss | refresh | bypass; empty: no cache policy applied
    attempts: int | None = None  # upstream calls made; None: the request never reached the attempts
    skipped: dict[str, str] = field(default_factory=dict)  # candidates passed over -> why (x-gateway-skipped)
    key_name: str = ""
    model: str = ""  # the `model` the client's body asked for
    virtual_key: str = ""  # the virtual key's name whose credential the request used
    trace_id: str = ""  # its trace: the caller's `traceparent`, or the span the gateway sampled
    client: str = ""  # the transport peer's address; kept only for the request log
    dropped_tools: str = ""  # /v1/responses: the built-in tools left out of the upstream call (comma-separated)
    ignored_fields: str = ""  # /v1/messages on chat: the fields its upstream was not sent (comma-separated)
    tags: str = ""
    ttft_s: float | None = None  # streams: until the response headers and first event went out
    upstream_s: float | None = None
    overhead_s: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    guardrails: list[GuardrailVerdict] = field(default_factory=list)
    guardrails_header: str = ""
    rate_limited_scope: str = ""  # key | deployment; empty: not rate limited
    budget_exceeded: bool = False
    error_code: str = ""
    stream_error: bool = False  # `error_code` went out as an error event of a stream already answered 200
    metadata: dict[str, str] | None = None  # the key's own, with the fields the caller added
    caller_metadata: dict[str, str] | None = None  # x-gateway-metadata (gateway.http.metadata)
    key_metadata: Mapping[str, str] | None = None  # the caller key's own `metadata`, once authenticated
    cost_nano: int | None = None  # what the answer cost, in nano-dollars; None: its deployment has no price
    saved_nano: int = 0  # what a cache hit saved, in nano-dollars
    # Only kept when the access log includes bodies (rendered, and redacted, by its thread).
    prompt: Any = None  # the request body as received, or the prompt
    completion_text: str | None = None
    response_body: bytes | None = None

    # Who and what, as soon as known.

    def requested(self, metadata: dict[str, str]) -> None:
        """The metadata the caller sent (already bounded)."""
        self.caller_metadata = metadata
        self.metadata = _merged(self.key_metadata, metadata)

    def authenticated(self, key_name: str, metadata: Mapping[str, str] | None) -> None:
        """The caller's key: its name and its own metadata."""
        self.key_name = key_name
        self.key_metadata = metadata
        self.metadata = _merged(metadata, self.caller_metadata)

    def routed(self, deployment: str, provider: str) -> None:
        """The deployment the request was routed to (its route's first candidate)."""
        self.deployment, self.provider = deployment, provider

    # Hooks for the stages that know more than the response headers say.

    def first_byte(self, now: float | None = None) -> None:
        """The first token left for the client (the stream's headers and first event)."""
        if self.ttft_s is None:
            self.ttft_s = (time.perf_counter() if now is None else now) - self.started

    def upstream(self, seconds: float) -> None:
        """Time spent waiting on the upstream, retries and backoff included (default: request less overhead)."""
        self.upstream_s = seconds

    def usage(self, prompt_tokens: int, completion_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens

    def usage_from(self, body: Mapping[str, Any]) -> None:
        """Token counts from an OpenAI body's (or final chunk's) `usage`, when it has one."""
        usage = body.get("usage")
        if isinstance(usage, dict):
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            self.usage(prompt if isinstance(prompt, int) else 0, completion if isinstance(completion, int) else 0)

    def guardrail(self, policy: str, stage: str, check: str, verdict: str) -> None:
        self.guardrails.append(GuardrailVerdict(policy, stage, check, verdict))

    def rate_limited(self, scope: str) -> None:
        self.rate_limited_scope = scope

    def budget_spent(self) -> None:
        self.budget_exceeded = True

    def stream_failed(self, code: str) -> None:
        """A stream already answered 200 ended with an error event instead of its end."""
        self.error_code, self.stream_error = code, True

    def bodies(self, prompt: Any, completion: str | None) -> None:
        """The prompt and completion text, for an access log that includes bodies (redacted there)."""
        self.prompt, self.completion_text = prompt, completion

    # Filled by the middleware.

    def finish(self, status: int, headers: Mapping[str, str], content_type: str) -> None:
        """At the end of the request: what the response says about it."""
        self.status = status
        self.duration_s = time.perf_counter() - self.started
        self.ended_at = time.time()
        self.deployment = headers.get(DEPLOYMENT) or self.deployment  # who answered, else who it was routed to
        self.provider = headers.get(PROVIDER) or self.provider
        self.stream = self.stream or content_type == "text/event-stream"
        self.cache_status = CACHE_STATUSES.get(headers.get(CACHE_STATUS, ""), "")
        attempts = headers.get(ATTEMPTS)
        if attempts and attempts.isdecimal():  # inline: on every request
            self.attempts = int(attempts)
        skipped = headers.get(SKIPPED)
        if skipped:
            self.skipped = parse_skipped(skipped)
        self.guardrails_header = headers.get(GUARDRAILS_HEADER, "")
        overhead_ms = headers.get(OVERHEAD_MS)
        if overhead_ms is not None:
            self.overhead_s = _float(overhead_ms) / 1000
            if self.upstream_s is None and self.attempts:
                self.upstream_s = max(0.0, self.duration_s - self.overhead_s)


def _merged(own: Mapping[str, str] | None, caller: dict[str, str] | None) -> dict[str, str] | None:
    """The key's metadata wins for every field it sets: the caller's only adds fields."""
    if not own:
        return caller
    return {**caller, **own} if caller else dict(own)


def _float(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0
