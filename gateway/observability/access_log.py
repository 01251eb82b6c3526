"""One line per request: who, what, where it went, how it ended, how long it took.

Written off the hot path: the request only appends its finished `RequestRecord` to a batch that
goes on a queue every `HANDOVER_S`; the standard library's `QueueListener` thread renders each
record (JSON via orjson, or `key=value` text) and writes the batch with one flush.
Never a secret: the caller appears by its key's name only.
Prompts and completions appear only with `include_bodies`, and then with PII redacted.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import re
import time
from collections.abc import Callable
from typing import Any

import orjson

from gateway.config.observability import AccessLogConfig
from gateway.observability.bodies import cut_bodies, redactor
from gateway.observability.log_output import BatchedFile, BatchedStream, Listener
from gateway.observability.record import RequestRecord

_UNSAFE = re.compile(r"[^A-Za-z0-9._:/@,+-]")
_MAX_VALUE = 200
HANDOVER_S = 0.05


class AccessLog:
    def __init__(self, config: AccessLogConfig) -> None:
        self.config = config
        self._queue: queue.SimpleQueue[list[RequestRecord] | None] = queue.SimpleQueue()
        self._listener: Listener | None = None
        self._output: BatchedFile | BatchedStream | None = None
        self._pending: list[RequestRecord] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        output = BatchedFile(self.config.path) if self.config.path else BatchedStream()
        self._output = output
        render = _Renderer(self.config, redactor() if self.config.include_bodies else None)
        self._listener = Listener(self._queue, output, render)
        self._listener.start()
        self._loop = asyncio.get_running_loop()

    def stop(self) -> None:
        """Write what is still queued, then stop the thread and close the output."""
        self._hand_over()
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
            self._loop = None
        if self._output is not None:
            self._output.close()
            self._output = None

    def write(self, record: RequestRecord) -> None:
        """All a request pays: an append. The records go to the thread in batches, at most
        `HANDOVER_S` late: waking it (and handing it the GIL) per request would cost more than the line."""
        if self._loop is None:
            return
        self._pending.append(record)
        if len(self._pending) == 1:
            self._loop.call_later(HANDOVER_S, self._hand_over)

    def _hand_over(self) -> None:
        if self._pending:
            batch, self._pending = self._pending, []
            self._queue.put_nowait(batch)


class _Renderer:
    """One request's line, in the writer thread: JSON, or `key=value` text."""

    def __init__(self, config: AccessLogConfig, redact: Callable[[str], str] | None) -> None:
        self._json = config.format == "json"
        self._redact = redact
        self._max_chars = config.max_body_chars

    def __call__(self, request: RequestRecord) -> str:
        fields = fields_of(request, request.ended_at)
        if self._redact is not None:
            fields.update(self._bodies(request))
        if self._json:
            return orjson.dumps(fields).decode()
        return " ".join(f"{name}={_safe(_text(value))}" for name, value in fields.items())

    def _bodies(self, request: RequestRecord) -> dict[str, str]:
        assert self._redact is not None
        bodies: dict[str, str] = {}
        prompt, completion = cut_bodies(request, self._max_chars)
        if prompt:
            bodies["prompt"] = self._redact(prompt)
        if completion:
            bodies["completion"] = self._redact(completion)
        return bodies


def fields_of(request: RequestRecord, created: float) -> dict[str, Any]:
    """The line's fields; those the request did not reach (no deployment, no stream) are left out."""
    fields: dict[str, Any] = {
        "ts": _timestamp(created),
        "request_id": request.request_id,
        "method": request.method,
        "path": request.path,
        "status": request.status,
        "ms": round(request.duration_s * 1000, 3),
    }
    if request.api:
        fields["api"] = request.api  # completions, chat, embeddings or responses
    if request.key_name:
        fields["key"] = request.key_name
    if request.dropped_tools:
        fields["dropped_tools"] = request.dropped_tools  # built-in tools left out of a bridged call
    if request.ignored_fields:
        fields["ignored_fields"] = request.ignored_fields  # fields of a translated call its upstream was not sent
    if request.deployment:  # the one that answered, or the one a refused request was routed to
        fields["deployment"] = request.deployment
        fields["provider"] = request.provider
    if request.attempts is not None:
        fields["attempts"] = request.attempts  # 0: the cache (or an identical request in flight) answered
    if request.skipped:
        fields["skipped"] = request.skipped  # {deployment: credential_unset | circuit_open | unavailable}
    if request.tags:
        fields["tags"] = request.tags
    if request.stream:
        fields["stream"] = True
        if request.ttft_s is not None:
            fields["ttft_ms"] = round(request.ttft_s * 1000, 3)
    if request.cache_status:
        fields["cache"] = request.cache_status
    if request.upstream_s is not None:
        fields["upstream_ms"] = round(request.upstream_s * 1000, 3)
    if request.overhead_s is not None:
        fields["overhead_ms"] = round(request.overhead_s * 1000, 3)
    if request.prompt_tokens or request.completion_tokens:
        fields["prompt_tokens"] = request.prompt_tokens
        fields["completion_tokens"] = request.completion_tokens
    if request.cost_nano is not None:
        fields["cost_usd"] = request.cost_nano / 1e9
        if request.saved_nano:
            fields["cost_saved_usd"] = request.saved_nano / 1e9
    if request.metadata:
        fields["metadata"] = request.metadata
    if request.guardrails_header or request.guardrails:
        fields["guardrails"] = request.guardrails_header or _verdicts(request)
    if request.rate_limited_scope or request.budget_exceeded or request.error_code:
        fields.update(_refusal(request))
    return fields


def _refusal(request: RequestRecord) -> dict[str, Any]:
    refusal: dict[str, Any] = {"error": request.error_code} if request.error_code else {}
    if request.stream_error:
        refusal["stream_error"] = True  # status 200 went out, then this error ended the stream
    if request.rate_limited_scope:
        refusal["rate_limited"] = request.rate_limited_scope
    if request.budget_exceeded:
        refusal["budget_exceeded"] = True
    return refusal


@functools.lru_cache(maxsize=4)
def _second(whole: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))


def _timestamp(created: float) -> str:
    """ISO 8601 in UTC with milliseconds; the part up to the second is formatted once per second."""
    return f"{_second(int(created))}.{int(created % 1 * 1000):03d}Z"


def _verdicts(request: RequestRecord) -> str:
    return ", ".join(f"{v.stage}.{v.check}={v.verdict}" for v in request.guardrails)


def _text(value: object) -> object:
    """A mapping as `name:value,name:value` (the text format has no nesting)."""
    if isinstance(value, dict):
        return ",".join(f"{name}:{item}" for name, item in value.items())
    return value


def _safe(value: object) -> str:
    """Text-format values: a client-supplied value (tags) cannot forge a field or a line."""
    return _UNSAFE.sub("_", str(value)[:_MAX_VALUE])
