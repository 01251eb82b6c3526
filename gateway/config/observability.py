"""The `observability:` section of config.yaml: /metrics, the dashboard, the access log, OpenTelemetry
tracing and the spend counters.

A leaf module (only pydantic): `gateway.config.settings` embeds it, the metrics and access-log modules read it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MetricsConfig(_Strict):
    # false: no /metrics, no /dashboard, no series recorded.
    enabled: bool = True
    # None: /metrics and /dashboard are served on the main port. A number: on their own listener
    # (every worker binds it with SO_REUSEPORT; any of them answers for all).
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    host: str | None = None  # of the separate listener; None: the main listener's host
    # A bearer token scrapers must send (`Authorization: Bearer …`); only as ${ENV_VAR}. Absent: open.
    # Given, but its variable unset or empty: closed (every scrape is refused, a warning at start-up).
    key: SecretStr | None = None
    # Where workers share their series when `--workers N` > 1 (prometheus-client's multiprocess
    # mode); emptied at start. Empty: a fresh temporary folder, removed at exit.
    multiprocess_dir: str = ""

    @property
    def token(self) -> str:
        return self.key.get_secret_value() if self.key is not None else ""

    @property
    def closed(self) -> bool:
        """A key is configured but has no value (its variable is unset): nothing may read the metrics."""
        return self.key is not None and not self.token


class AccessLogConfig(_Strict):
    # One line per request on stderr (or `path`), written off the request path.
    enabled: bool = True
    # json: one JSON object per line; text: key=value pairs.
    format: Literal["json", "text"] = "json"
    path: str = ""  # empty: standard error; else appended to this file (reopened when rotated)
    # Off by default. On: the prompt and the completion (non-streamed) are logged, PII redacted.
    include_bodies: bool = False
    # With include_bodies: each body is cut to this many characters.
    max_body_chars: Annotated[int, Field(ge=16, le=1_000_000)] = 2000


class DashboardConfig(_Strict):
    enabled: bool = True  # /dashboard, served beside /metrics (same listener, same key)
    # How often each worker keeps a snapshot of the totals, so that the page's first view already
    # shows the last minute's rates and percentiles (the server keeps that window, not the page).
    sample_s: Annotated[float, Field(ge=0.05, le=60)] = 5.0


TraceSampler = Literal[
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
]


class TracingConfig(_Strict):
    """OpenTelemetry traces over OTLP/HTTP (protobuf). Every setting left out here falls back to the
    standard environment variable (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_HEADERS`,
    `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`); where both are set, this wins."""

    # None: on when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set and
    # OTEL_SDK_DISABLED is not "true". true / false: on / off whatever the environment says.
    enabled: bool | None = None
    endpoint: str | None = None  # the collector's base URL (`/v1/traces` is appended), e.g. http://otel-collector:4318
    headers: dict[str, SecretStr] = Field(default_factory=dict)  # sent with every export (an auth token, say)
    service_name: str | None = None  # `service.name`; default: OTEL_SERVICE_NAME, else llm-gateway
    # Which traces are kept; default: OTEL_TRACES_SAMPLER, else parentbased_always_on.
    sampler: TraceSampler | None = None
    sampler_arg: Annotated[float, Field(ge=0, le=1)] | None = None  # the ratio of the *traceidratio samplers
    # Prompts and completions on the attempt spans (`gen_ai.input.messages`, `gen_ai.output.messages`),
    # PII redacted as in the access log. Off: never any content on a span.
    capture_content: bool = False


class SpendConfig(_Strict):
    """Spend per key, per deployment and per listed metadata key, in daily buckets (Redis when configured)."""

    # Metadata fields whose values spend is also grouped by (e.g. team).
    metadata_keys: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]] = Field(default_factory=list)
    # Daily spend buckets older than this expire.
    retention_days: Annotated[int, Field(ge=1, le=3660)] = 400
    # Distinct values of each listed metadata key a worker adds to one day's spend; later ones are
    # added to `other`, so that callers cannot grow the spend view (and its Redis hash) without bound.
    max_values: Annotated[int, Field(ge=1, le=100_000)] = 1000


class MetadataConfig(_Strict):
    """What a caller may add to its key's metadata with `x-gateway-metadata` (gateway.http.metadata)."""

    # Fields a caller may add with x-gateway-metadata; more: 400 naming the header.
    max_fields: Annotated[int, Field(ge=1, le=64)] = 16
    # Characters per metadata value; longer: 400 naming the header.
    max_value_chars: Annotated[int, Field(ge=1, le=1024)] = 256
    max_header_bytes: Annotated[int, Field(ge=64, le=8190)] = 4096  # 8190: what aiohttp reads of a header


class ObservabilityConfig(_Strict):
    # /metrics (Prometheus) and who may read it.
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    # The structured access log.
    access_log: AccessLogConfig = Field(default_factory=AccessLogConfig)
    # The /dashboard status page.
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)
    # OpenTelemetry traces over OTLP/HTTP.
    tracing: TracingConfig = Field(default_factory=TracingConfig)
    # Spend per key, deployment and metadata value.
    spend: SpendConfig = Field(default_factory=SpendConfig)
    # Bounds on what callers add to their key's metadata.
    metadata: MetadataConfig = Field(default_factory=MetadataConfig)


def metrics_local_only(metrics: MetricsConfig, keyed: bool) -> bool:
    """The safe default: with API keys or an admin key configured (`keyed`), no metrics key and no
    listener of their own, /metrics, /dashboard and /dashboard/data answer loopback clients only
    (anyone else gets 403). A gateway without keys keeps them open."""
    return keyed and metrics.enabled and metrics.key is None and metrics.port is None
