"""What each answer says of itself beyond the metrics: its trace, its metadata and its cost.

A middleware just inside the error envelope (so its 400s are enveloped, and what it sets reaches
the record before the metrics and the access log read it):

- reads `x-gateway-metadata` (400 when malformed, `observability.metadata` bounds it) into the
  record, where the caller key's own `metadata` wins for every field it sets;
- with tracing on, opens the request's server span (`POST /v1/completions`, any route: the parent
  is the caller's `traceparent` when it sends one), hands the attempts its context
  (`gateway.pipeline.traced`), and ends it with what the request did: status, deployment, attempts,
  cache status, guardrail verdicts, limits, cost, metadata (`gateway.metadata.<key>`), with events for a
  cache hit, a guardrail denial, a rate limit or a spent budget, and the first streamed byte; a
  stream that ended with an error event after its 200 is an error span naming the error's code;
  `x-gateway-trace-id` names the trace on every answer of a sampled request;
- prices the answer: `x-gateway-cost-usd` on JSON answers of a deployment with a `price` (a cache hit
  costs 0 and says what it saved in `x-gateway-cost-saved-usd`), `cost_usd` on the record (the access
  log, `gateway_cost_usd_total`, streams included), and the spend counters of the admin API, which
  count refused requests too (under their key, and their deployment once routed, else `unrouted`).

With tracing off, a request pays a header lookup, a dict of prices and a few additions: no span.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler
from opentelemetry.trace import Span, SpanKind, StatusCode, set_span_in_context

from gateway.api.errors import GatewayError
from gateway.api.response_headers import ATTEMPTS, CACHE_STATUS, DEPLOYMENT, PROVIDER, SKIPPED
from gateway.api.trace_context import TRACE_ID_HEADER
from gateway.config.loader import LoadedConfig
from gateway.config.observability import ObservabilityConfig
from gateway.http.app_keys import RECORD
from gateway.http.metadata import read_metadata
from gateway.keys.spend import SpendBook, Spent
from gateway.observability.bodies import redactor
from gateway.observability.metrics import UNROUTED
from gateway.observability.record import RequestRecord
from gateway.observability.tracing import Tracing, tracing_wanted
from gateway.pipeline.cost import TokenUsage, cost_nano, usd
from gateway.pipeline.serving import ServingState
from gateway.pipeline.traced import CURRENT, RequestTelemetry, Target
from policies.limits.specs import Price

COST_HEADER = "x-gateway-cost-usd"
SAVED_HEADER = "x-gateway-cost-saved-usd"
TRACE_ID = web.RequestKey("trace_id", str)
# Not worth a trace: probes and scrapes.
UNTRACED = frozenset({"/health", "/ready", "/metrics", "/dashboard", "/dashboard/data"})
# gen_ai.provider.name of each provider type (the semantic conventions' names where they have one).
GENAI_PROVIDERS = {
    "openai": "openai",
    "openai-chat": "openai",
    "azure": "azure.ai.openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
}


class _Generation:
    """What the config now serving says of its deployments: prices, and the upstreams the spans name."""

    def __init__(self, loaded: LoadedConfig) -> None:
        self.loaded = loaded
        config = loaded.config
        self.prices: dict[str, Price] = {d.name: d.price for d in config.deployments if d.price is not None}
        self.cached_prices = any(price.cached_prompt_per_1m is not None for price in self.prices.values())
        self.targets = {d.name: _target(d.provider.type, d.provider.options) for d in config.deployments}


def _target(provider_type: str, options: Mapping[str, Any]) -> Target:
    url = options.get("base_url") or options.get("endpoint")
    model = options.get("model") if isinstance(options.get("model"), str) else None
    address, port = None, None
    if isinstance(url, str):
        try:
            parts = urlsplit(url)
            address, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            pass
    return Target(GENAI_PROVIDERS.get(provider_type, provider_type), model, address, port)


class Telemetry:
    def __init__(self, config: ObservabilityConfig, environ: Mapping[str, str] | None = None) -> None:
        self.config = config
        self.environ = os.environ if environ is None else environ
        self.wants_tracing = tracing_wanted(config.tracing, self.environ)
        self.tracing: Tracing | None = None  # built when the worker starts
        self.spend: SpendBook | None = None
        self.serving: ServingState | None = None  # set at start-up: read per request without an app lookup
        self._capture: Callable[[str], str] | None = None
        self._generation: _Generation | None = None

    def start(self, redis: Any, prefix: str, count_export_error: Callable[[int], None] | None) -> None:
        """In the worker, at start-up: the tracer provider and its export thread, the spend counters."""
        if self.wants_tracing:
            self.tracing = Tracing(self.config.tracing, self.environ)
            self.tracing.failures.count = count_export_error
            if self.config.tracing.capture_content:
                self._capture = redactor()
        spend = self.config.spend
        self.spend = SpendBook(redis, prefix, spend.metadata_keys, spend.retention_days, max_values=spend.max_values)
        self.spend.start()

    async def stop(self) -> None:
        if self.spend is not None:
            await self.spend.stop()
        if self.tracing is not None:
            self.tracing.shutdown()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        record = request[RECORD]
        metadata = read_metadata(request.headers, self.config.metadata)
        if metadata is not None:
            record.requested(metadata)
        generation = self._current()
        tracing = self.tracing
        span: Span | None = None
        telemetry: RequestTelemetry | None = None
        if tracing is not None and request.path not in UNTRACED:
            span = self._server_span(tracing, request)
            targets = generation.targets if generation is not None else {}
            telemetry = RequestTelemetry(tracing.tracer, set_span_in_context(span), targets, self._capture)
        elif generation is not None and generation.cached_prices:
            telemetry = RequestTelemetry(None)
        if telemetry is None:
            try:
                response = await handler(request)
            except GatewayError as exc:  # a refusal is spend too: a request of its key (and deployment)
                self._account(record, exc.status, exc.headers or {}, None, generation, None)
                raise
            self._account(record, response.status, response.headers, response, generation, None)
            return response
        token = CURRENT.set(telemetry)
        try:
            response = await handler(request)
        except BaseException as exc:
            if isinstance(exc, GatewayError):
                self._account(record, exc.status, exc.headers or {}, None, generation, telemetry)
            if span is not None:
                _end_failed(span, request, exc)
            raise
        finally:
            CURRENT.reset(token)
        cost = self._account(record, response.status, response.headers, response, generation, telemetry)
        if span is not None:
            _end(span, request, response, cost)
        return response

    async def on_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        """Every answer of a sampled request names its trace, streams and error envelopes included."""
        trace_id = request.get(TRACE_ID)
        if trace_id:
            response.headers[TRACE_ID_HEADER] = trace_id

    def _current(self) -> _Generation | None:
        serving = self.serving
        if serving is None:  # set with the app's own serving state, at start-up: none, no generation
            return None
        loaded = serving.current.loaded
        generation = self._generation
        if generation is None or generation.loaded is not loaded:
            generation = self._generation = _Generation(loaded)
        return generation

    def _server_span(self, tracing: Tracing, request: web.Request) -> Span:
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else None
        attributes: dict[str, Any] = {
            "http.request.method": request.method,
            "url.path": request.path,
            "gateway.request_id": request[RECORD].request_id,
        }
        if route:
            attributes["http.route"] = route
        span = tracing.tracer.start_span(
            f"{request.method} {route}" if route else request.method,
            context=tracing.parent_of(request.headers),
            kind=SpanKind.SERVER,
            attributes=attributes,
        )
        context = span.get_span_context()
        if context.trace_flags.sampled:
            request[TRACE_ID] = request[RECORD].trace_id = f"{context.trace_id:032x}"
        return span

    def _account(
        self,
        record: RequestRecord,
        status: int,
        headers: Mapping[str, str],
        response: web.StreamResponse | None,
        generation: _Generation | None,
        telemetry: RequestTelemetry | None,
    ) -> int | None:
        """The answer's cost (None: its deployment has no price), on the record, the answer and the
        spend. `response` None: the request was refused with an error (`status`, `headers`)."""
        deployment = headers.get(DEPLOYMENT) or record.deployment  # who answered, else who it was routed to
        if not record.api or not (deployment or record.key_name):
            return None  # not a completion request, or refused before it was known whose it was
        price = generation.prices.get(deployment) if deployment and generation is not None else None
        reported = telemetry.usage if telemetry is not None else None
        cached, written = (reported.cached_tokens, reported.cache_write_tokens) if reported else (0, 0)
        usage = TokenUsage(record.prompt_tokens, record.completion_tokens, cached, written)
        cost = saved = 0
        if headers.get(ATTEMPTS) != "0":
            cost = cost_nano(price, usage) if price is not None else 0
        elif price is not None and response is not None and status == 200:  # the cache or an identical request
            saved = cost_nano(price, _stored_usage(response) or usage)
        if price is not None:
            record.cost_nano, record.saved_nano = cost, saved
            if response is not None and not response.prepared:
                response.headers[COST_HEADER] = usd(cost)
                if saved:
                    response.headers[SAVED_HEADER] = usd(saved)
        if self.spend is not None:
            key = record.key_name or "-"
            prompt, completion = (usage.prompt_tokens, usage.completion_tokens) if not saved else (0, 0)
            self.spend.add(Spent(key, deployment or UNROUTED, cost, saved, prompt, completion, record.metadata))
        return cost if price is not None else None


def _stored_usage(response: web.StreamResponse) -> TokenUsage | None:
    """The usage a JSON answer from the cache reports (what the call it saved would have cost)."""
    body = response.body if isinstance(response, web.Response) else None
    if not isinstance(body, bytes) or b'"usage"' not in body:
        return None
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return TokenUsage.of(parsed.get("usage")) if isinstance(parsed, dict) else None


def _end(span: Span, request: web.Request, response: web.StreamResponse, cost: int | None) -> None:
    # One `set_attributes` call: the SDK takes the span's lock and validates once per call, not per attribute.
    record = request[RECORD]
    headers = response.headers
    attributes: dict[str, Any] = {"http.response.status_code": response.status}
    _served_by(attributes, headers, record)
    if ATTEMPTS in headers:
        attributes["gateway.attempts"] = int(headers[ATTEMPTS])
    if SKIPPED in headers:
        attributes["gateway.skipped"] = headers[SKIPPED]
    cache = headers.get(CACHE_STATUS)
    if cache:
        attributes["gateway.cache.status"] = cache.lower()
        if cache == "HIT":
            span.add_event("gateway.cache.hit", {"gateway.cache.age_s": int(headers.get("Age") or 0)})
    if record.prompt_tokens or record.completion_tokens:
        attributes["gen_ai.usage.input_tokens"] = record.prompt_tokens
        attributes["gen_ai.usage.output_tokens"] = record.completion_tokens
    if cost is not None:
        attributes["gateway.cost_usd"] = cost / 1e9
        if record.saved_nano:
            attributes["gateway.cost_saved_usd"] = record.saved_nano / 1e9
    if record.ttft_s is not None:
        span.add_event("gateway.first_byte", {"gateway.ttft_ms": round(record.ttft_s * 1000, 3)})
    _describe(span, attributes, request, record, ATTEMPTS in headers and response.status != 429)
    if record.stream_error:  # answered 200, then the stream ended with an error event
        attributes["gateway.error"] = attributes["error.type"] = record.error_code
        span.set_status(StatusCode.ERROR, record.error_code)
    elif response.status >= 500:
        attributes["error.type"] = str(response.status)
        span.set_status(StatusCode.ERROR)
    span.set_attributes(attributes)
    span.end()


def _served_by(attributes: dict[str, Any], headers: Mapping[str, str], record: RequestRecord) -> None:
    """The deployment that answered (its headers), else the one the request was routed to."""
    deployment, provider = headers.get(DEPLOYMENT) or record.deployment, headers.get(PROVIDER) or record.provider
    if deployment:
        attributes["gateway.deployment"] = deployment
    if provider:
        attributes["gateway.provider"] = provider


def _end_failed(span: Span, request: web.Request, exc: BaseException) -> None:
    attributes: dict[str, Any] = {}
    if isinstance(exc, GatewayError):
        attributes["http.response.status_code"] = exc.status
        attributes["gateway.error"] = exc.code or exc.type
        _served_by(attributes, exc.headers or {}, request[RECORD])
        if exc.status >= 500:
            attributes["error.type"] = exc.code or str(exc.status)
            span.set_status(StatusCode.ERROR, exc.code or exc.type)
    elif isinstance(exc, Exception):
        attributes["error.type"] = type(exc).__qualname__
        span.set_status(StatusCode.ERROR)
    else:
        attributes["gateway.client_left"] = True
    admitted = isinstance(exc, GatewayError) and ATTEMPTS in (exc.headers or {})
    _describe(span, attributes, request, request[RECORD], admitted)
    span.set_attributes(attributes)
    span.end()


def _describe(
    span: Span, attributes: dict[str, Any], request: web.Request, record: RequestRecord, admitted: bool
) -> None:
    """Who asked, with what metadata, and what the policies decided (guardrails, limits): into
    `attributes`, and the decisions' events onto the span."""
    key = record.key_name
    if key:
        attributes["gateway.key"] = key
    for name, value in (record.metadata or {}).items():
        attributes[f"gateway.metadata.{name}"] = value
    if record.guardrails:
        attributes["gateway.guardrails"] = [f"{v.stage}.{v.check}={v.verdict}" for v in record.guardrails]
        for verdict in record.guardrails:
            if verdict.verdict == "deny":
                span.add_event(
                    "gateway.guardrail.denied",
                    {
                        "gateway.guardrail.policy": verdict.policy,
                        "gateway.guardrail.stage": verdict.stage,
                        "gateway.guardrail.check": verdict.check,
                    },
                )
    if record.rate_limited_scope:
        attributes["gateway.limits"] = f"rate_limited.{record.rate_limited_scope}"
        span.add_event("gateway.rate_limited", {"gateway.rate_limit.scope": record.rate_limited_scope})
    elif record.budget_exceeded:
        attributes["gateway.limits"] = "budget_exceeded"
        span.add_event("gateway.budget_exceeded")
    elif admitted:
        attributes["gateway.limits"] = "admitted"


TELEMETRY = web.AppKey("telemetry", Telemetry)
