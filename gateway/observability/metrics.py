"""The gateway's Prometheus series, in a registry of the app's own (no import-time globals).

Per request, `observe` runs once at its end: a few increments on label children cached in
dicts, nothing per chunk. With `--workers N` the values live in prometheus-client's multiprocess
files (PROMETHEUS_MULTIPROC_DIR, set by the parent before it forks), and a scrape of any worker
reads every worker's files: one scrape sees all of them combined.

Labels are deployment and provider names from the config, and words from fixed sets: never a
key, a prompt or a user id.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess, values
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

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

GaugeMode = Literal["livesum", "livemax", "max"]


def multiprocess_dir() -> str | None:
    """The shared folder when this process runs as one of several workers; None otherwise."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


@dataclass(frozen=True, slots=True)
class _DeploymentSeries:
    """One deployment's children, looked up once and reused by every request to it."""

    duration: dict[bool, Histogram]  # by stream
    overhead: Histogram
    upstream: Histogram
    ttft: Histogram
    prompt_tokens: Counter
    completion_tokens: Counter


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
            multiprocess.MultiProcessCollector(self.registry, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        self._define(own)
        self._requests: dict[tuple[str, str, str, bool, str], Counter] = {}
        self._deployments: dict[str, _DeploymentSeries] = {}
        self._cache_events: dict[str, Counter] = {}
        self.build_info.labels(__version__, platform.python_version()).set(1)
        self.budget_exceeded.inc(0)
        for scope in RATE_LIMIT_SCOPES:
            self.rate_limited.labels(scope)
        self._auth_failures = {reason: self.auth_failures.labels(reason) for reason in AUTH_FAILURE_REASONS}
        self._admin_auth_failures = {
            reason: self.admin_auth_failures.labels(reason) for reason in ADMIN_AUTH_FAILURE_REASONS
        }

    def _define(self, registry: CollectorRegistry | None) -> None:
        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(f"gateway_{name}", doc, labels, registry=registry)

        def gauge(name: str, doc: str, labels: tuple[str, ...], mode: GaugeMode) -> Gauge:
            return Gauge(f"gateway_{name}", doc, labels, registry=registry, multiprocess_mode=mode)

        def histogram(name: str, doc: str, labels: tuple[str, ...], buckets: tuple[float, ...]) -> Histogram:
            return Histogram(f"gateway_{name}", doc, labels, registry=registry, buckets=buckets)

        routed = ("deployment", "provider", "status_class", "stream", "cache_status")
        self.requests = counter("requests", "Completion requests answered.", routed)
        self.duration = histogram(
            "request_duration_seconds", "Whole requests, to the last byte.", ("deployment", "stream"), LATENCY_BUCKETS
        )
        self.ttft = histogram(
            "time_to_first_token_seconds", "Streams: until the first event left.", ("deployment",), LATENCY_BUCKETS
        )
        self.upstream = histogram(
            "upstream_duration_seconds", "Time on the upstream, retries included.", ("deployment",), LATENCY_BUCKETS
        )
        self.overhead = histogram(
            "overhead_seconds", "Time spent in the gateway itself.", ("deployment",), OVERHEAD_BUCKETS
        )
        self.tokens = counter("tokens", "Tokens the upstreams reported.", ("deployment", "kind"))
        self.in_flight = gauge("in_flight_requests", "Completion requests being served.", (), "livesum")
        self.upstream_errors = counter("upstream_errors", "Failed upstream attempts.", ("deployment", "reason"))
        self.retries = counter("retries", "Attempts on a deployment that had just failed.", ("deployment",))
        self.fallbacks = counter("fallbacks", "Moves to a fallback after a failure.", ("deployment", "fallback"))
        self.circuit_state = gauge(
            "circuit_state", "Circuit breaker: 0 closed, 1 half-open, 2 open.", ("deployment",), "livemax"
        )
        self.cache_events = counter("cache_events", "Response cache outcomes and tier events.", ("result",))
        self.guardrail_verdicts = counter(
            "guardrail_verdicts", "Guardrail check outcomes.", ("policy", "stage", "check", "verdict")
        )
        self.rate_limited = counter("rate_limited", "Requests refused by a rate limit.", ("scope",))
        self.budget_exceeded = counter("budget_exceeded", "Requests refused because a budget was spent.")
        self.auth_failures = counter("auth_failures", "Failed API-key authentications.", ("reason",))
        self.admin_auth_failures = counter("admin_auth_failures", "Failed admin-key authentications.", ("reason",))
        self.redis_errors = counter("redis_errors", "Failed or timed-out Redis calls.", ("component",))
        self.build_info = gauge("build_info", "The gateway's version.", ("version", "python"), "max")

    def observe(self, record: RequestRecord) -> None:
        """A completion request ended: count it and its times, tokens and verdicts."""
        deployment = record.deployment or UNROUTED
        key = (deployment, record.provider or UNROUTED, f"{record.status // 100}xx", record.stream, record.cache_status)
        requests = self._requests.get(key)
        if requests is None:
            requests = self._requests[key] = self.requests.labels(*key[:3], str(key[3]).lower(), key[4] or "none")
        requests.inc()
        series = self._deployments.get(deployment) or self._series(deployment)
        series.duration[record.stream].observe(record.duration_s)
        if record.overhead_s is not None:
            series.overhead.observe(record.overhead_s)
        if record.upstream_s is not None:
            series.upstream.observe(record.upstream_s)
        if record.ttft_s is not None and record.stream:
            series.ttft.observe(record.ttft_s)
        if record.prompt_tokens:
            series.prompt_tokens.inc(record.prompt_tokens)
        if record.completion_tokens:
            series.completion_tokens.inc(record.completion_tokens)
        if record.cache_status:
            self.cache_event(record.cache_status)
        if record.guardrails or record.rate_limited_scope or record.budget_exceeded:
            self._policies(record)

    def _series(self, deployment: str) -> _DeploymentSeries:
        series = _DeploymentSeries(
            duration={stream: self.duration.labels(deployment, str(stream).lower()) for stream in (False, True)},
            overhead=self.overhead.labels(deployment),
            upstream=self.upstream.labels(deployment),
            ttft=self.ttft.labels(deployment),
            prompt_tokens=self.tokens.labels(deployment, "prompt"),
            completion_tokens=self.tokens.labels(deployment, "completion"),
        )
        self._deployments[deployment] = series
        return series

    def cache_event(self, result: str, amount: int = 1) -> None:
        counter = self._cache_events.get(result)
        if counter is None:
            counter = self._cache_events[result] = self.cache_events.labels(result)
        counter.inc(amount)

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

    def admin_auth_failure(self, reason: str) -> None:
        """A failed admin-key authentication; `reason` from `ADMIN_AUTH_FAILURE_REASONS`."""
        self._admin_auth_failures[reason].inc()

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition of every series (every worker's, in multiprocess mode)."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _values_are_shared() -> bool:
    """prometheus_client picks its value class once, at import: was the folder set by then?"""
    return values.ValueClass is not values.MutexValue
