"""OpenTelemetry tracing: the SDK's tracer provider of one worker, exporting OTLP/HTTP protobuf.

Configured by the standard environment variables (`OTEL_EXPORTER_OTLP_ENDPOINT`,
`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`,
`OTEL_RESOURCE_ATTRIBUTES`…) and by `observability.tracing`, which wins where both say something.
Off unless `enabled: true`, or the config leaves `enabled` out and an OTLP endpoint variable is set.

Each worker builds its own provider when it starts (after the fork), with `service.instance.id`
naming the host and process, so `--workers N` export side by side. Spans leave through the SDK's
batch processor, whose thread encodes and posts them: the event loop only queues a finished span.
A collector that is down or refusing costs a counter (`gateway_trace_export_errors_total`) and one
log line per minute; the SDK's own per-failure logging is silenced.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)
from opentelemetry.trace import Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway import __version__
from gateway.config.observability import TracingConfig

log = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "llm-gateway"
DEFAULT_ENDPOINT = "http://localhost:4318"
TRACES_PATH = "/v1/traces"
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_LOG_INTERVAL_S = 60.0
_SHUTDOWN_WAIT_S = 5.0
_PROPAGATOR = TraceContextTextMapPropagator()


def tracing_wanted(config: TracingConfig, environ: Mapping[str, str]) -> bool:
    """Whether this gateway traces: the config's `enabled`, or, when it says nothing, whether an
    OTLP endpoint is set in the environment (and the SDK is not disabled there)."""
    if config.enabled is not None:
        return config.enabled
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(environ.get(name) for name in _ENDPOINT_VARIABLES)


def traces_url(config: TracingConfig, environ: Mapping[str, str]) -> str:
    """Where spans go: the config's base URL, else the traces variable (whole), else the base variable."""
    if config.endpoint:
        return config.endpoint.rstrip("/") + TRACES_PATH
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    return environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/") + TRACES_PATH


def sampler_of(config: TracingConfig, environ: Mapping[str, str]) -> Sampler:
    name = config.sampler or environ.get("OTEL_TRACES_SAMPLER", "").strip().lower() or "parentbased_always_on"
    ratio = config.sampler_arg
    if ratio is None:
        try:
            ratio = float(environ.get("OTEL_TRACES_SAMPLER_ARG", "1"))
        except ValueError:
            ratio = 1.0
    ratio = min(max(ratio, 0.0), 1.0)
    samplers: dict[str, Callable[[], Sampler]] = {
        "always_on": lambda: ALWAYS_ON,
        "always_off": lambda: ALWAYS_OFF,
        "traceidratio": lambda: TraceIdRatioBased(ratio),
        "parentbased_always_on": lambda: ParentBased(ALWAYS_ON),
        "parentbased_always_off": lambda: ParentBased(ALWAYS_OFF),
        "parentbased_traceidratio": lambda: ParentBased(TraceIdRatioBased(ratio)),
    }
    make = samplers.get(name)
    if make is None:
        log.warning("OTEL_TRACES_SAMPLER=%r is not a sampler the gateway knows; using parentbased_always_on", name)
        make = samplers["parentbased_always_on"]
    return make()


class ExportFailures:
    """Counts failed exports (in the batch processor's thread) and logs them at most once a minute."""

    def __init__(self, url: str, count: Callable[[int], None] | None = None) -> None:
        self.url = url
        self.count = count  # the metric, once the app has one
        self.total = 0
        self._unreported = 0
        self._logged_at = 0.0
        self._lock = threading.Lock()

    def failed(self, spans: int) -> None:
        with self._lock:
            self.total += 1
            self._unreported += 1
            now = time.monotonic()
            report = now - self._logged_at >= _LOG_INTERVAL_S
            if report:
                self._logged_at, unreported, self._unreported = now, self._unreported, 0
        if self.count is not None:
            self.count(1)
        if report:
            log.warning(
                "trace export to %s failed %d time(s) since the last report (%d spans dropped in the last); "
                "is the collector up?",
                self.url,
                unreported,
                spans,
            )


class _CountingExporter(SpanExporter):
    def __init__(self, inner: SpanExporter, failures: ExportFailures) -> None:
        self._inner = inner
        self._failures = failures

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._inner.export(spans)
        except Exception:  # an exporter bug must not kill the processor's thread
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self._failures.failed(len(spans))
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class _Resource(Resource):
    """The SDK's `Resource` (immutable), its hash computed once: the OTLP encoder groups every span of
    a batch by resource, and `Resource.__hash__` serialises the attributes to JSON on each call."""

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource.attributes, resource.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


class Tracing:
    """One worker's tracer and its exporter (built at the worker's start-up)."""

    def __init__(self, config: TracingConfig, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self.capture_content = config.capture_content
        self.url = traces_url(config, environ)
        self.failures = ExportFailures(self.url)
        headers = {name: value.get_secret_value() for name, value in config.headers.items()} or None
        exporter = OTLPSpanExporter(endpoint=self.url, headers=headers)
        # The SDK logs every failed export (and each retry) itself: ExportFailures says it once a minute.
        logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
        service = config.service_name or environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME
        resource = _Resource(
            Resource.create(
                {
                    "service.name": service,
                    "service.version": __version__,
                    "service.instance.id": f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}",
                }
            )
        )
        self.provider = TracerProvider(resource=resource, sampler=sampler_of(config, environ))
        self.processor = BatchSpanProcessor(_CountingExporter(exporter, self.failures))
        self.provider.add_span_processor(self.processor)
        self.tracer: Tracer = self.provider.get_tracer("llm-gateway", __version__)

    @staticmethod
    def parent_of(headers: Mapping[str, str]) -> Context:
        """The caller's trace (W3C `traceparent` / `tracestate`), or an empty context."""
        return _PROPAGATOR.extract(headers)

    def shutdown(self) -> None:
        """Export what is queued (for at most a few seconds: a dead collector cannot hold the exit)."""
        done = threading.Thread(target=self.provider.shutdown, name="otel-shutdown", daemon=True)
        done.start()
        done.join(_SHUTDOWN_WAIT_S)
