"""What one request did, gathered as it runs and read once at its end by the metrics and the access log.

The middleware creates it (`RECORD` in `gateway.http.app_keys`) and fills what the response's own
headers say (deployment, provider, attempts, candidates skipped, cache status, overhead). The stages that know more
call its methods: the first streamed byte, token usage, time on the upstream, guardrail
verdicts, a rate limit or a spent budget. Nothing here is written per chunk.
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
    deployment: str = ""
    provider: str = ""
    stream: bool = False
    cache_status: str = ""  # hit | miss | refresh | bypass; empty: no cache policy applied
    attempts: int = 0
    skipped: dict[str, str] = field(default_factory=dict)  # candidates passed over -> why (x-gateway-skipped)
    key_name: str = ""
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
    metadata: dict[str, str] | None = None  # x-gateway-metadata over the key's own (gateway.http.metadata)
    key_metadata: dict[str, str] | None = None  # the caller key's own `metadata`, once authenticated
    cost_nano: int | None = None  # what the answer cost, in nano-dollars; None: its deployment has no price
    saved_nano: int = 0  # what a cache hit saved, in nano-dollars
    # Only kept when the access log includes bodies (rendered, and redacted, by its thread).
    prompt: Any = None  # the request body as received, or the prompt
    completion_text: str | None = None
    response_body: bytes | None = None

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

    def bodies(self, prompt: Any, completion: str | None) -> None:
        """The prompt and completion text, for an access log that includes bodies (redacted there)."""
        self.prompt, self.completion_text = prompt, completion

    # Filled by the middleware.

    def finish(self, status: int, headers: Mapping[str, str], content_type: str) -> None:
        """At the end of the request: what the response says about it."""
        self.status = status
        self.duration_s = time.perf_counter() - self.started
        self.ended_at = time.time()
        self.deployment = headers.get(DEPLOYMENT, "")
        self.provider = headers.get(PROVIDER, "")
        self.stream = self.stream or content_type == "text/event-stream"
        self.cache_status = CACHE_STATUSES.get(headers.get(CACHE_STATUS, ""), "")
        attempts = headers.get(ATTEMPTS)
        self.attempts = int(attempts) if attempts and attempts.isdecimal() else 0  # inline: on every request
        skipped = headers.get(SKIPPED)
        if skipped:
            self.skipped = parse_skipped(skipped)
        self.guardrails_header = headers.get(GUARDRAILS_HEADER, "")
        overhead_ms = headers.get(OVERHEAD_MS)
        if overhead_ms is not None:
            self.overhead_s = _float(overhead_ms) / 1000
            if self.upstream_s is None and self.attempts:
                self.upstream_s = max(0.0, self.duration_s - self.overhead_s)


def _float(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0
