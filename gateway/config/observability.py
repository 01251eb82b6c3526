"""The `observability:` section of config.yaml: /metrics, the dashboard and the access log.

A leaf module (only pydantic): `gateway.config.settings` embeds it, the metrics and access-log modules read it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MetricsConfig(_Strict):
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
    enabled: bool = True
    format: Literal["json", "text"] = "json"
    path: str = ""  # empty: standard error; else appended to this file (reopened when rotated)
    # Off by default. On: the prompt and the completion (non-streamed) are logged, PII redacted.
    include_bodies: bool = False
    max_body_chars: Annotated[int, Field(ge=16, le=1_000_000)] = 2000


class DashboardConfig(_Strict):
    enabled: bool = True  # /dashboard, served beside /metrics (same listener, same key)


class ObservabilityConfig(_Strict):
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    access_log: AccessLogConfig = Field(default_factory=AccessLogConfig)
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)


def metrics_local_only(metrics: MetricsConfig, keyed: bool) -> bool:
    """The safe default: with API keys or an admin key configured (`keyed`), no metrics key and no
    listener of their own, /metrics, /dashboard and /dashboard/data answer loopback clients only
    (anyone else gets 403). A gateway without keys keeps them open."""
    return keyed and metrics.enabled and metrics.key is None and metrics.port is None
