"""Each upstream attempt as an OpenTelemetry span, named and described as the GenAI semantic
conventions say (`text_completion my-model`, `chat my-model`; `gen_ai.*`, `server.*`, `error.type`),
with the gateway's own deployment and attempt number, and the trace context it sends upstream.

The request's `RequestTelemetry` reaches the attempts through a context variable, set by the HTTP
layer only when tracing is on or a price needs the prompt-cache figures: otherwise every attempt
pays one `ContextVar.get` and no span, no wrapper, no allocation. While an attempt runs, its
`traceparent` is what `gateway.api.trace_context` hands the upstream call.

Prompts and completions go on a span only with `observability.tracing.capture_content`, through
the PII redactor (`capture`), as the access log's bodies do.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import orjson
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, StatusCode, Tracer

from gateway.api.errors import GatewayError
from gateway.api.trace_context import TRACEPARENT, TRACESTATE, UPSTREAM_TRACE_HEADERS
from gateway.pipeline.cost import TokenUsage
from gateway.routing.deployments import Deployment
from providers.base import CompletionResult, CompletionStream, Provider, UpstreamRequest

OPERATIONS = {"completions": "text_completion", "chat": "chat", "embeddings": "embeddings"}
_USAGE = b'"usage"'
_FINISH = b'"finish_reason":"'
_REQUEST_NUMBERS = (("max_tokens", "max_tokens"), ("temperature", "temperature"), ("top_p", "top_p"))


@dataclass(frozen=True, slots=True)
class Target:
    """What the spans say of a deployment's upstream."""

    provider: str  # gen_ai.provider.name
    model: str | None = None  # the upstream model name configured; None: the client's
    address: str | None = None
    port: int | None = None


@dataclass(slots=True)
class RequestTelemetry:
    tracer: Tracer | None  # None: not traced (the request is here for the prompt-cache figures only)
    parent: Context | None = None  # the server span's context
    targets: Mapping[str, Target] = field(default_factory=dict)
    capture: Callable[[str], str] | None = None  # the redactor, when content is captured
    attempts: int = 0
    usage: TokenUsage | None = None  # the last answer's usage as reported (with its cached prompt tokens)


CURRENT: ContextVar[RequestTelemetry | None] = ContextVar("request_telemetry", default=None)


async def complete(provider: Provider, deployment: Deployment, request: UpstreamRequest) -> CompletionResult:
    telemetry = CURRENT.get()
    if telemetry is None:
        return await provider.complete(request)
    with _attempt(telemetry, deployment, request) as span:
        result = await provider.complete(request)
    telemetry.usage = TokenUsage.of(result.body.get("usage"))
    if span is not None:
        _answered(span, result.body, telemetry)
        span.end()
    return result


async def stream(provider: Provider, deployment: Deployment, request: UpstreamRequest) -> CompletionStream:
    telemetry = CURRENT.get()
    if telemetry is None:
        return await provider.stream(request)
    with _attempt(telemetry, deployment, request) as span:
        opened = await provider.stream(request)
    return _TracedStream(opened, span, telemetry)


@contextlib.contextmanager
def _attempt(telemetry: RequestTelemetry, deployment: Deployment, request: UpstreamRequest) -> Iterator[Span | None]:
    """The attempt's span (None: not sampled), its traceparent on the upstream call, a failure recorded on it."""
    span = _begin(telemetry, deployment, request)
    token = UPSTREAM_TRACE_HEADERS.set(_headers(span)) if span is not None else None
    try:
        yield span
    except BaseException as exc:
        _failed(span, exc)
        raise
    finally:
        if token is not None:
            UPSTREAM_TRACE_HEADERS.reset(token)


def _begin(telemetry: RequestTelemetry, deployment: Deployment, request: UpstreamRequest) -> Span | None:
    telemetry.attempts += 1
    if telemetry.tracer is None:
        return None
    body = request.body
    target = telemetry.targets.get(deployment.name) or Target(deployment.provider_type)
    model = target.model or str(body.get("model") or "")
    operation = OPERATIONS.get(request.api, request.api)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": target.provider,
        "gen_ai.request.model": model,
        "gateway.deployment": deployment.name,
        "gateway.attempt": telemetry.attempts,
    }
    if request.api == "embeddings" and isinstance(body.get("encoding_format"), str):
        attributes["gen_ai.request.encoding_formats"] = (body["encoding_format"],)
    for name, attribute in _REQUEST_NUMBERS:
        value = body.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            attributes[f"gen_ai.request.{attribute}"] = value
    if target.address:
        attributes["server.address"] = target.address
        if target.port:
            attributes["server.port"] = target.port
    if telemetry.capture is not None:
        prompt_field = "input" if request.api == "embeddings" else "prompt"
        attributes["gen_ai.input.messages"] = _input_messages(body, telemetry.capture, prompt_field)
    return telemetry.tracer.start_span(
        f"{operation} {model}", context=telemetry.parent, kind=SpanKind.CLIENT, attributes=attributes
    )


def _headers(span: Span) -> dict[str, str]:
    context = span.get_span_context()
    headers = {TRACEPARENT: f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"}
    state = context.trace_state.to_header()
    if state:
        headers[TRACESTATE] = state
    return headers


def _failed(span: Span | None, exc: BaseException) -> None:
    if span is None:
        return
    if isinstance(exc, GatewayError):
        span.set_attribute("error.type", exc.code or exc.type)
        span.set_status(StatusCode.ERROR, exc.code or exc.type)
    elif isinstance(exc, Exception):
        span.set_attribute("error.type", type(exc).__qualname__)
        span.set_status(StatusCode.ERROR)
    else:  # cancelled: the client left, or the deadline moved on
        span.set_attribute("gateway.abandoned", True)
    span.end()


def _answered(span: Span, body: Mapping[str, Any], telemetry: RequestTelemetry) -> None:
    """The answer's own figures: model, id, finish reasons, usage (and its text, when captured), in
    one `set_attributes` call (the SDK locks and validates once per call, not per attribute)."""
    attributes: dict[str, Any] = {}
    if isinstance(body.get("model"), str):
        attributes["gen_ai.response.model"] = body["model"]
    if isinstance(body.get("id"), str):
        attributes["gen_ai.response.id"] = body["id"]
    choices = body.get("choices")
    if isinstance(choices, list):
        reasons = [
            c["finish_reason"] for c in choices if isinstance(c, dict) and isinstance(c.get("finish_reason"), str)
        ]
        if reasons:
            attributes["gen_ai.response.finish_reasons"] = reasons
        if telemetry.capture is not None:
            attributes["gen_ai.output.messages"] = _output_messages(choices, telemetry.capture)
    usage = telemetry.usage
    if usage is not None:
        attributes["gen_ai.usage.input_tokens"] = usage.prompt_tokens
        if "data" not in body:  # an embeddings answer generates no tokens
            attributes["gen_ai.usage.output_tokens"] = usage.completion_tokens
        if usage.cached_tokens:
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
    if attributes:
        span.set_attributes(attributes)


class _TracedStream:
    """The attempt's stream, relayed unchanged; its span ends with the stream (first token an event,
    the last chunk's usage and finish reasons as attributes)."""

    def __init__(self, stream: CompletionStream, span: Span | None, telemetry: RequestTelemetry) -> None:
        self._stream = stream
        self._span = span
        self._telemetry = telemetry
        self._reasons: list[str] = []
        self._last: dict[str, Any] = {}
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        first = True
        try:
            async for payloads in self._stream:
                if first and self._span is not None:
                    first = False
                    self._span.add_event("gen_ai.first_token", timestamp=time.time_ns())
                for payload in payloads:
                    if _USAGE in payload or _FINISH in payload:
                        self._note(payload)
                yield payloads
        except BaseException as exc:
            self._end(exc)
            raise
        self._end(None)

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            self._end(None)
        # A stream that counts its own usage (the local engine, Anthropic's native events) is
        # costed by those figures, as it is metered.
        reported = self.reported_usage()
        if reported is not None:
            self._telemetry.usage = TokenUsage.of(reported)

    def reported_usage(self) -> dict[str, Any] | None:
        """The traced stream's own usage where it reports one (`UsageReportingStream`), so that
        tracing never changes what is metered."""
        reported = getattr(self._stream, "reported_usage", None)
        return None if reported is None else reported()

    def _note(self, payload: bytes) -> None:
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return
        if not isinstance(chunk, dict):
            return
        usage = TokenUsage.of(chunk.get("usage"))
        if usage is not None:
            self._telemetry.usage = usage
        for name in ("id", "model"):
            if isinstance(chunk.get(name), str):
                self._last[name] = chunk[name]
        choices = chunk.get("choices")
        if isinstance(choices, list):
            self._reasons += [c["finish_reason"] for c in choices if isinstance(c, dict) and c.get("finish_reason")]

    def _end(self, exc: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        span = self._span
        if span is None:
            return
        if exc is not None:
            _failed(span, exc)
            return
        reported = self.reported_usage()  # a stream that counts its own (a native one's events nest it)
        if reported is not None:
            self._telemetry.usage = TokenUsage.of(reported)
        _answered(span, {**self._last, "choices": [{"finish_reason": r} for r in self._reasons]}, self._telemetry)
        span.end()


def _input_messages(body: Mapping[str, Any], redact: Callable[[str], str], prompt_field: str = "prompt") -> str:
    """The prompt (or a chat's messages) as `gen_ai.input.messages`: role and text parts, redacted."""
    messages = body.get("messages")
    if isinstance(messages, list):
        shown = [
            {"role": str(m.get("role")), "parts": [{"type": "text", "content": redact(_text(m.get("content")))}]}
            for m in messages
            if isinstance(m, dict)
        ]
    else:  # a prompt, or an embeddings request's input texts
        shown = [{"role": "user", "parts": [{"type": "text", "content": redact(_text(body.get(prompt_field)))}]}]
    return orjson.dumps(shown).decode()


def _output_messages(choices: list[Any], redact: Callable[[str], str]) -> str:
    shown = []
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        message = choice.get("message")
        text = message.get("content") if isinstance(message, dict) else choice.get("text")
        shown.append(
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": redact(_text(text))}],
                "finish_reason": str(choice.get("finish_reason")),
            }
        )
    return orjson.dumps(shown).decode()


def _text(value: Any) -> str:
    """Text of a prompt, a message's content or a completion: strings (or lists of them) only."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [v if isinstance(v, str) else v.get("text") if isinstance(v, dict) else None for v in value]
        return "\n".join(part for part in parts if isinstance(part, str))
    return ""
