"""One app's metrics and access log, and what the middleware calls at the start and end of each request."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from aiohttp import web

from gateway.api.errors import CLIENT_CLOSED
from gateway.api.trace_context import TRACEPARENT
from gateway.config.observability import ObservabilityConfig, metrics_local_only
from gateway.observability.access_log import AccessLog
from gateway.observability.endpoints import ObservabilityEndpoints
from gateway.observability.metrics import GatewayMetrics
from gateway.observability.metrics_sync import MetricsSync
from gateway.observability.record import RequestRecord
from gateway.pipeline.assembly import SharedState
from gateway.routing.deployments import Deployment

_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")


class Observability:
    def __init__(
        self, config: ObservabilityConfig, completion_paths: Mapping[str, str], *, keyed: bool = False
    ) -> None:
        """`completion_paths`: path -> the client API it serves (completions, chat): the requests counted.
        `keyed`: API keys or an admin key are configured (then /metrics and the dashboard
        answer loopback clients only, unless they have a key or a port of their own)."""
        self.config = config
        self.metrics = GatewayMetrics() if config.metrics.enabled else None
        self.access_log = AccessLog(config.access_log) if config.access_log.enabled else None
        self.wants_bodies = self.access_log is not None and config.access_log.include_bodies
        self._completion_paths = completion_paths
        # Scrapes and dashboard polls are neither traffic nor worth a log line each.
        self.quiet_paths = frozenset({"/metrics", "/dashboard", "/dashboard/data"})
        self.endpoints: ObservabilityEndpoints | None = None
        if self.metrics is not None:
            local_only = metrics_local_only(config.metrics, keyed)
            self.endpoints = ObservabilityEndpoints(config, self.metrics, self.refresh, local_only=local_only)
        self._sync: MetricsSync | None = None
        # The request log's intake (gateway.requestlog), set by the composition root; None: no log.
        self.request_log: Callable[[RequestRecord], None] | None = None

    def log_requests(self, submit: Callable[[RequestRecord], None], *, bodies: bool) -> None:
        """Hand every client-API request's record to `submit` as it ends (`bodies`: with the
        prompt and answer the middleware keeps)."""
        self.request_log = submit
        self.wants_bodies = self.wants_bodies or bodies

    def start(self, shared: SharedState, deployments: Callable[[], Mapping[str, Deployment]]) -> None:
        """Once the app's shared state exists: start the log's writer thread and the metrics' sync.
        `deployments`: those of the config now serving (the dashboard shows which cannot serve)."""
        if self.access_log is not None:
            self.access_log.start()
        if self.endpoints is not None:
            self.endpoints.deployments = deployments
        if self.metrics is not None:
            self._sync = MetricsSync(self.metrics, shared, lambda: list(deployments()))
            self._sync.start()

    async def stop(self) -> None:
        if self._sync is not None:
            await self._sync.stop()
        if self.access_log is not None:
            self.access_log.stop()

    def refresh(self) -> None:
        """Before /metrics or the dashboard reads the series: bring this worker's counts up to date."""
        if self._sync is not None:
            self._sync.run()

    def auth_failure(self, reason: str) -> None:
        """A failed API-key authentication (`gateway_auth_failures_total`)."""
        if self.metrics is not None:
            self.metrics.auth_failure(reason)

    def admin_auth_failure(self, reason: str) -> None:
        """A failed admin-key authentication (`gateway_admin_auth_failures_total`)."""
        if self.metrics is not None:
            self.metrics.admin_auth_failure(reason)

    def begin(self, request: web.Request, request_id: str) -> RequestRecord:
        record = RequestRecord(request_id, request.method, request.path)
        api = self._completion_paths.get(request.path)  # completions or chat; None: another endpoint
        if api is not None:
            record.api = api
            if self.metrics is not None:
                record.completion = True
                self.metrics.began()
            if self.request_log is not None:  # what only the request log keeps
                record.client = request.remote or ""
                traceparent = request.headers.get(TRACEPARENT)
                if traceparent is not None:
                    record.trace_id = trace_id_of(traceparent)
        return record

    def end(self, record: RequestRecord, response: web.StreamResponse | None) -> None:
        """`response` None: the client went away before it was answered."""
        if response is None:
            record.finish(CLIENT_CLOSED, {}, "")
        else:
            record.finish(response.status, response.headers, response.content_type)
        if record.completion and self.metrics is not None:
            self.metrics.observe(record)
        if self.access_log is not None and record.path not in self.quiet_paths:
            self.access_log.write(record)
        if self.request_log is not None and record.api:
            self.request_log(record)

    async def keep_bodies(self, request: web.Request, record: RequestRecord, response: web.StreamResponse) -> None:
        """For an access log with bodies: the raw request body and a JSON answer, parsed by its thread."""
        if request.body_exists:
            record.prompt = await request.read()  # aiohttp keeps the body the handler read: no second read
        if isinstance(response, web.Response) and isinstance(response.body, bytes):
            record.response_body = response.body


def trace_id_of(traceparent: str) -> str:
    """The trace id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`); "" when malformed."""
    parts = traceparent.strip().lower().split("-")
    if len(parts) != 4 or not _TRACE_ID.match(parts[1]) or parts[1] == "0" * 32:
        return ""
    return parts[1]
