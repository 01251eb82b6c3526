"""The gateway's Prometheus series, in a registry of the app's own (no import-time globals).

Per request, `observe` runs once at its end and only adds to plain numbers (`_PerRequest`): no
lock, no label lookup, nothing per chunk. A scrape reads them through a custom collector
(prometheus-client's documented `Collector` API). With `--workers N` the values must live in
prometheus-client's multiprocess files (PROMETHEUS_MULTIPROC_DIR, set by the parent before it
forks) for one scrape of any worker to see every worker's: there `flush` adds what changed since
the last flush to the series' children, once a second and before a scrape (`MetricsSync`).

Labels are deployment and provider names from the config, and words from fixed sets: never a
key, a prompt or a user id.
"""

from __future__ import annotations

import os
import platform
import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess, values
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from gateway import __version__
from gateway.keys.throttle import ADMIN_AUTH_FAILURE_REASONS, AUTH_FAILURE_REASONS
from gateway.observability.record import RequestRecord

# Whole requests, the upstream and time to first token: from half a millisecond to two minutes.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
# The gateway's own share of a request: tens of microseconds upward.
OVERHEAD_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1)
CIRCUIT_VALUES = {"closed": 0, "half_open": 1, "open": 2}
RATE_LIMIT_SCOPES = ("key", "deployment")
UNROUTED = "unrouted"  # requests refused before a deployment was chosen (401, 400, 404)
# Error codes are the gateway's own words, but an upstream's 4xx passes its own through: a label
# takes the first MAX_ERROR_CODES well-formed codes a worker sees, and `other` for the rest.
MAX_ERROR_CODES = 64
# Why a request's record did not reach the request log (gateway.requestlog.drops).
REQUEST_LOG_DROP_REASONS = ("queue_full", "store_error", "shutdown")
OTHER_ERROR = "other"
_ERROR_CODE = re.compile(r"^[a-z0-9_.]{1,64}$")

GaugeMode = Literal["livesum", "livemax", "max"]


class _WorkersFiles(Collector):
    """prometheus-client's sum of the workers' files, less a file a worker has created and not sized
    yet: it is empty for a moment as the worker makes its first series, and prometheus-client reads
    an empty file as an error (`struct.error`) that fails the whole scrape (and ended the dashboard's
    sampler, so that worker exited 1 at SIGTERM). Its issue #1199."""

    def __init__(self, path: str) -> None:
        self._path = path

    def collect(self) -> Iterable[Metric]:
        files = [str(file) for file in Path(self._path).glob("*.db") if _sized(file)]
        merged: Iterable[Metric] = multiprocess.MultiProcessCollector.merge(files, accumulate=True)  # type: ignore[no-untyped-call]
        return merged


def _sized(file: Path) -> bool:
    try:
        return file.stat().st_size > 0
    except FileNotFoundError:  # a dead worker's gauges, removed meanwhile
        return False


def multiprocess_dir() -> str | None:
    """The shared folder when this process runs as one of several workers; None otherwise."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class _Histogram:
    """One histogram series as plain numbers: observations per bucket (not cumulative; the last
    is +Inf) and their sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # `le` is inclusive: a value on a bound is in it
        self.sum += value

    def cumulative(self) -> list[tuple[str, float]]:
        buckets, total = [], 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += count
            buckets.append((floatToGoString(bound), float(total)))  # type: ignore[no-untyped-call]
        return buckets


@dataclass(slots=True)
class _DeploymentSeries:
    """One deployment's per-request numbers."""

    duration: tuple[_Histogram, _Histogram]  # by stream: (False, True)
    overhead: _Histogram = field(default_factory=lambda: _Histogram(OVERHEAD_BUCKETS))
    upstream: _Histogram = field(default_factory=lambda: _Histogram(LATENCY_BUCKETS))
    ttft: _Histogram = field(default_factory=lambda: _Histogram(LATENCY_BUCKETS))
    prompt_tokens: int = 0
    completion_tokens: int = 0


# (deployment, provider, status // 100, stream, cache status, api): the `gateway_requests` labels, raw.
RequestKey = tuple[str, str, int, bool, str, str]


@dataclass(slots=True)
class _PerRequest:
    """What every completion request adds to: the hot path's only metrics state."""

    requests: dict[RequestKey, int] = field(default_factory=dict)
    deployments: dict[str, _DeploymentSeries] = field(default_factory=dict)
    cache_events: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0

    def series(self, deployment: str) -> _DeploymentSeries:
        series = self.deployments.get(deployment)
        if series is None:
            duration = (_Histogram(LATENCY_BUCKETS), _Histogram(LATENCY_BUCKETS))
            series = self.deployments[deployment] = _DeploymentSeries(duration)
        return series


def _request_labels(key: RequestKey) -> list[str]:
    deployment, provider, status_class, stream, cache_status, api = key
    return [deployment, provider, f"{status_class}xx", "true" if stream else "false", cache_status or "none", api]


# `api`: the client API called, "completions" (/v1/completions) or "chat" (/v1/chat/completions).
_ROUTED = ("deployment", "provider", "status_class", "stream", "cache_status", "api")
_DOCS = {
    "requests": "Completion requests answered.",
    "request_duration_seconds": "Whole requests, to the last byte.",
    "time_to_first_token_seconds": "Streams: until the first event left.",
    "upstream_duration_seconds": "Time on the upstream, retries included.",
    "overhead_seconds": "Time spent in the gateway itself.",
    "tokens": "Tokens the upstreams reported.",
    "cache_events": "Response cache outcomes and tier events.",
    "in_flight_requests": "Completion requests being served.",
}


class _PerRequestCollector(Collector):
    """The per-request series, read from their plain numbers when /metrics is scraped."""

    def __init__(self, numbers: _PerRequest) -> None:
        self._numbers = numbers

    def collect(self) -> Iterator[Metric]:
        numbers = self._numbers
        requests = CounterMetricFamily("gateway_requests", _DOCS["requests"], labels=_ROUTED)
        for key, count in list(numbers.requests.items()):
            requests.add_metric(_request_labels(key), count)
        yield requests
        families = {
            name: HistogramMetricFamily(f"gateway_{name}", _DOCS[name], labels=labels)
            for name, labels in (
                ("request_duration_seconds", ("deployment", "stream")),
                ("time_to_first_token_seconds", ("deployment",)),
                ("upstream_duration_seconds", ("deployment",)),
                ("overhead_seconds", ("deployment",)),
            )
        }
        tokens = CounterMetricFamily("gateway_tokens", _DOCS["tokens"], labels=("deployment", "kind"))
        for name, series in list(numbers.deployments.items()):
            for stream, histogram in zip(("false", "true"), series.duration, strict=True):
                families["request_duration_seconds"].add_metric([name, stream], histogram.cumulative(), histogram.sum)
            for family, histogram in (
                ("time_to_first_token_seconds", series.ttft),
                ("upstream_duration_seconds", series.upstream),
                ("overhead_seconds", series.overhead),
            ):
                families[family].add_metric([name], histogram.cumulative(), histogram.sum)
            tokens.add_metric([name, "prompt"], series.prompt_tokens)
            tokens.add_metric([name, "completion"], series.completion_tokens)
        yield from families.values()
        yield tokens
        cache = CounterMetricFamily("gateway_cache_events", _DOCS["cache_events"], labels=("result",))
        for result, count in list(numbers.cache_events.items()):
            cache.add_metric([result], count)
        yield cache
        yield GaugeMetricFamily("gateway_in_flight_requests", _DOCS["in_flight_requests"], value=numbers.in_flight)


class GatewayMetrics:
    def __init__(self) -> None:
        self.multiprocess_dir = multiprocess_dir()
        if self.multiprocess_dir and not _values_are_shared():
            raise RuntimeError(
                "PROMETHEUS_MULTIPROC_DIR was set after prometheus_client was imported: workers would not share series"
            )
        self.registry = CollectorRegistry()  # what /metrics exposes
        own = None if self.multiprocess_dir else self.registry  # shared mode: the files are the registry
        if self.multiprocess_dir:
            self.registry.register(_WorkersFiles(self.multiprocess_dir))
        self.numbers = _PerRequest()
        self._error_codes: set[str] = set()  # the `code` label values this worker has used
        self._define(own)
        # Multiprocess: the per-request series as children of prometheus-client's own, which `flush` feeds.
        self._shared_series = _SharedSeries() if self.multiprocess_dir else None
        if self._shared_series is None:
            self.registry.register(_PerRequestCollector(self.numbers))
        self.build_info.labels(__version__, platform.python_version()).set(1)
        self.budget_exceeded.inc(0)
        for scope in RATE_LIMIT_SCOPES:
            self.rate_limited.labels(scope)
        self._auth_failures = {reason: self.auth_failures.labels(reason) for reason in AUTH_FAILURE_REASONS}
        self._admin_auth_failures = {
            reason: self.admin_auth_failures.labels(reason) for reason in ADMIN_AUTH_FAILURE_REASONS
        }
        self._request_log_dropped = {
            reason: self.request_log_dropped.labels(reason) for reason in REQUEST_LOG_DROP_REASONS
        }

    def _define(self, registry: CollectorRegistry | None) -> None:
        """The series counted where they happen (per-request ones are `_PerRequest`'s)."""

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(f"gateway_{name}", doc, labels, registry=registry)

        def gauge(name: str, doc: str, labels: tuple[str, ...], mode: GaugeMode) -> Gauge:
            return Gauge(f"gateway_{name}", doc, labels, registry=registry, multiprocess_mode=mode)

        self.upstream_errors = counter("upstream_errors", "Failed upstream attempts.", ("deployment", "reason"))
        self.retries = counter("retries", "Attempts on a deployment that had just failed.", ("deployment",))
        self.fallbacks = counter("fallbacks", "Moves to a fallback after a failure.", ("deployment", "fallback"))
        self.circuit_state = gauge(
            "circuit_state", "Circuit breaker: 0 closed, 1 half-open, 2 open.", ("deployment",), "livemax"
        )
        self.guardrail_verdicts = counter(
            "guardrail_verdicts", "Guardrail check outcomes.", ("policy", "stage", "check", "verdict")
        )
        self.rate_limited = counter("rate_limited", "Requests refused by a rate limit.", ("scope",))
        self.budget_exceeded = counter("budget_exceeded", "Requests refused because a budget was spent.")
        self.auth_failures = counter("auth_failures", "Failed API-key authentications.", ("reason",))
        self.admin_auth_failures = counter("admin_auth_failures", "Failed admin-key authentications.", ("reason",))
        self.redis_errors = counter("redis_errors", "Failed or timed-out Redis calls.", ("component",))
        self.request_errors = counter(
            "request_errors",
            "Completion requests that ended in an error, by its code; mid_stream: after a 200.",
            ("deployment", "api", "code", "mid_stream"),
        )
        self.cost_usd = counter("cost_usd", "What answers cost at their deployment's price, in USD.", ("deployment",))
        self.trace_export_errors = counter("trace_export_errors", "Failed exports of OpenTelemetry spans.")
        self.request_log_written = counter("request_log_written", "Records stored in the request log.")
        self.request_log_dropped = counter(
            "request_log_dropped", "Records the request log could not store, by reason.", ("reason",)
        )
        self.build_info = gauge("build_info", "The gateway's version.", ("version", "python"), "max")

    def began(self) -> None:
        """A completion request started (`gateway_in_flight_requests`)."""
        self.numbers.in_flight += 1

    def observe(self, record: RequestRecord) -> None:
        """A completion request ended: count it and its times, tokens and verdicts."""
        numbers = self.numbers
        numbers.in_flight -= 1
        deployment = record.deployment or UNROUTED
        key = (
            deployment,
            record.provider or UNROUTED,
            record.status // 100,
            record.stream,
            record.cache_status,
            record.api,
        )
        numbers.requests[key] = numbers.requests.get(key, 0) + 1
        series = numbers.deployments.get(deployment) or numbers.series(deployment)
        series.duration[record.stream].observe(record.duration_s)
        if record.overhead_s is not None:
            series.overhead.observe(record.overhead_s)
        if record.upstream_s is not None:
            series.upstream.observe(record.upstream_s)
        if record.ttft_s is not None and record.stream:
            series.ttft.observe(record.ttft_s)
        series.prompt_tokens += record.prompt_tokens or 0
        series.completion_tokens += record.completion_tokens or 0
        if record.cache_status:
            self.cache_event(record.cache_status)
        if record.guardrails or record.rate_limited_scope or record.budget_exceeded:
            self._policies(record)
        if record.cost_nano:  # priced and not free (gateway.pipeline.cost)
            self.cost_usd.labels(deployment).inc(record.cost_nano / 1e9)
        if record.error_code:
            code = self._error_code(record.error_code)
            self.request_errors.labels(deployment, record.api, code, "true" if record.stream_error else "false").inc()

    def _error_code(self, code: str) -> str:
        """`code` as a label value: one of a bounded set, else `other`."""
        codes = self._error_codes
        if code in codes:
            return code
        if len(codes) < MAX_ERROR_CODES and _ERROR_CODE.match(code):
            codes.add(code)
            return code
        return OTHER_ERROR

    def cache_event(self, result: str, amount: int = 1) -> None:
        events = self.numbers.cache_events
        events[result] = events.get(result, 0) + amount

    def flush(self) -> None:
        """Multiprocess: add what the per-request numbers gained since the last flush to this
        worker's files, so that a scrape of any worker sees them. Single process: nothing to do,
        the collector reads the numbers themselves."""
        if self._shared_series is not None:
            self._shared_series.add(self.numbers)

    def _policies(self, record: RequestRecord) -> None:
        for verdict in record.guardrails:
            self.guardrail_verdicts.labels(verdict.policy, verdict.stage, verdict.check, verdict.verdict).inc()
        if record.rate_limited_scope:
            self.rate_limited.labels(record.rate_limited_scope).inc()
        if record.budget_exceeded:
            self.budget_exceeded.inc()

    def auth_failure(self, reason: str) -> None:
        """A failed API-key authentication; `reason` from `AUTH_FAILURE_REASONS`."""
        self._auth_failures[reason].inc()

    def request_log_drop(self, reason: str, records: int) -> None:
        """Records the request log dropped (`gateway_request_log_dropped_total`)."""
        self._request_log_dropped[reason].inc(records)

    def admin_auth_failure(self, reason: str) -> None:
        """A failed admin-key authentication; `reason` from `ADMIN_AUTH_FAILURE_REASONS`."""
        self._admin_auth_failures[reason].inc()

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition of every series (every worker's, in multiprocess mode)."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _SharedSeries:
    """The per-request series as prometheus-client children (multiprocess mode: each worker's
    values live in its files), fed the numbers' growth since the last `add`."""

    def __init__(self) -> None:
        def histogram(name: str, labels: tuple[str, ...], buckets: tuple[float, ...]) -> Histogram:
            return Histogram(f"gateway_{name}", _DOCS[name], labels, registry=None, buckets=buckets)

        self.requests = Counter("gateway_requests", _DOCS["requests"], _ROUTED, registry=None)
        self.duration = histogram("request_duration_seconds", ("deployment", "stream"), LATENCY_BUCKETS)
        self.ttft = histogram("time_to_first_token_seconds", ("deployment",), LATENCY_BUCKETS)
        self.upstream = histogram("upstream_duration_seconds", ("deployment",), LATENCY_BUCKETS)
        self.overhead = histogram("overhead_seconds", ("deployment",), OVERHEAD_BUCKETS)
        self.tokens = Counter("gateway_tokens", _DOCS["tokens"], ("deployment", "kind"), registry=None)
        self.cache_events = Counter("gateway_cache_events", _DOCS["cache_events"], ("result",), registry=None)
        self.in_flight = Gauge(
            "gateway_in_flight_requests", _DOCS["in_flight_requests"], registry=None, multiprocess_mode="livesum"
        )
        self._sent: dict[object, float] = {}  # what was added so far, by series (and bucket)

    def add(self, numbers: _PerRequest) -> None:
        for key, count in list(numbers.requests.items()):
            self._counter(("requests", key), count, self.requests, _request_labels(key))
        for name, series in list(numbers.deployments.items()):
            for stream, histogram in zip(("false", "true"), series.duration, strict=True):
                self._histogram(("duration", name, stream), histogram, self.duration.labels(name, stream))
            self._histogram(("ttft", name), series.ttft, self.ttft.labels(name))
            self._histogram(("upstream", name), series.upstream, self.upstream.labels(name))
            self._histogram(("overhead", name), series.overhead, self.overhead.labels(name))
            self._counter(("prompt", name), series.prompt_tokens, self.tokens, [name, "prompt"])
            self._counter(("completion", name), series.completion_tokens, self.tokens, [name, "completion"])
        for result, count in list(numbers.cache_events.items()):
            self._counter(("cache", result), count, self.cache_events, [result])
        self.in_flight.set(numbers.in_flight)

    def _counter(self, key: object, total: float, family: Counter, labels: list[str]) -> None:
        delta = total - self._sent.get(key, 0)
        if delta > 0:
            family.labels(*labels).inc(delta)
            self._sent[key] = total

    def _histogram(self, key: tuple[str, ...], numbers: _Histogram, child: Histogram) -> None:
        # prometheus-client keeps a histogram child's buckets as one value each (not cumulative)
        # and their sum: add to those what was observed since, as `observe` would have one by one.
        for index, count in enumerate(numbers.counts):
            delta = count - self._sent.get((*key, index), 0)
            if delta > 0:
                child._buckets[index].inc(delta)
                self._sent[(*key, index)] = count
        delta_sum = numbers.sum - self._sent.get(key, 0.0)
        if delta_sum:
            child._sum.inc(delta_sum)
            self._sent[key] = numbers.sum


def _values_are_shared() -> bool:
    """prometheus_client picks its value class once, at import: was the folder set by then?"""
    return values.ValueClass is not values.MutexValue
