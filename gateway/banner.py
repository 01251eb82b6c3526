"""What `gateway serve` says once at start-up (INFO, from the parent process): where it listens,
each deployment and whether it can serve, where the dashboard and the admin API are, and whether
traces go anywhere. A newcomer reads what runs without opening the config."""

from __future__ import annotations

from collections.abc import Mapping

from gateway import __version__
from gateway.config.loader import LoadedConfig
from gateway.config.request_log import shown, target
from gateway.config.settings import ServerConfig

_EVERY_INTERFACE = {"0.0.0.0", "::", ""}  # noqa: S104 - the words an operator uses to listen everywhere


def base_url(host: str, port: int) -> str:
    shown = "0.0.0.0" if host in _EVERY_INTERFACE else host  # noqa: S104 - shown, not bound
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def banner(
    loaded: LoadedConfig, server: ServerConfig, environ: Mapping[str, str], config_path: str | None = None
) -> list[str]:
    config = loaded.config
    url = base_url(server.host, server.port)
    where = " (every interface)" if server.host in _EVERY_INTERFACE else ""
    port = " (a free port: aiohttp's line below names it)" if server.port == 0 else ""
    workers = f"{server.workers} worker{'s' if server.workers > 1 else ''}"
    lines = [f"llm-gateway {__version__} on {url}{where}{port}, {workers}, config {loaded.source}"]
    width = max((len(name) for name in loaded.deployments), default=0)
    for name, deployment in loaded.deployments.items():
        state = f"unavailable: {deployment.unavailable}" if deployment.unavailable else "ready"
        lines.append(f"  deployment {name:<{width}}  {deployment.config.provider.type:<11} {state}")
    if not loaded.deployments:
        lines.append("  no deployments: add one under `deployments:` (see docs/reference/configuration.md)")
    lines.append(f"  auth: {'API keys required' if loaded.auth_required else 'none (every caller is accepted)'}")
    metrics = config.observability.metrics
    if metrics.enabled and config.observability.dashboard.enabled:
        at = base_url(metrics.host or server.host, metrics.port) if metrics.port is not None else url
        lines.append(f"  dashboard: {at}/dashboard   metrics: {at}/metrics")
    if loaded.admin_enabled:
        lines.append(f"  admin API: {url}/admin   console: {url}/console")
    else:
        lines.append("  admin API and console: off (no usable admin.key)")
    lines.append(f"  request log: {_request_log(loaded, config_path)}")
    lines.append(f"  tracing: {_tracing(loaded, environ)}")
    return lines


def _request_log(loaded: LoadedConfig, config_path: str | None) -> str:
    kind, path = target(loaded.config.request_log, config_path)
    if kind == "postgresql":
        return shown(loaded.config.request_log.url.get_secret_value())
    return f"SQLite, {path}" if path is not None else "off"


def _tracing(loaded: LoadedConfig, environ: Mapping[str, str]) -> str:
    from gateway.observability.tracing import traces_url, tracing_wanted  # OpenTelemetry: imported when serving

    settings = loaded.config.observability.tracing
    if not tracing_wanted(settings, environ):
        return "off (set OTEL_EXPORTER_OTLP_ENDPOINT, or observability.tracing.enabled: true)"
    return f"on, spans to {traces_url(settings, environ)}"
