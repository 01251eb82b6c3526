"""/metrics, /dashboard and /dashboard/data: on the main port, or on a listener of their own.

With `observability.metrics.key` set, /metrics and /dashboard/data want `Authorization: Bearer
<key>`; the dashboard page itself holds no data, and asks for the key when its data is refused.
When the key names an environment variable that is unset (or empty) they stay closed: a scraper
is refused rather than the metrics left open by a forgotten variable. Without a key they are open,
except on a gateway with API keys or an admin key and no metrics port of their own: there they
answer loopback clients only (127.0.0.0/8, ::1; the transport peer's address), 403 to any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from importlib import resources
from typing import Any

import orjson
from aiohttp import web

from gateway.api.errors import AuthenticationFailed, PermissionDenied
from gateway.config.errors import ListenError
from gateway.config.observability import ObservabilityConfig
from gateway.observability.dashboard import snapshot
from gateway.observability.metrics import GatewayMetrics
from gateway.routing.deployments import Deployment

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_PAGE = "static/dashboard.html"
WINDOW_S = 60.0  # the dashboard's rates and percentiles are over the last minute


def is_local_peer(remote: str | None) -> bool:
    """Whether the transport peer is this machine: a loopback address (127.0.0.0/8, ::1, or either
    mapped into IPv6), or no address at all (a Unix socket)."""
    if not remote:
        return True
    try:
        address = ipaddress.ip_address(remote.partition("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


class ObservabilityEndpoints:
    def __init__(
        self,
        config: ObservabilityConfig,
        metrics: GatewayMetrics,
        before_read: Callable[[], None],
        *,
        local_only: bool = False,
    ) -> None:
        """`local_only`: answer loopback clients only (see `metrics_local_only`)."""
        self._config = config
        self.local_only = local_only
        self.is_local: Callable[[str | None], bool] = is_local_peer  # the peer check (tests may replace it)
        self._metrics = metrics
        self._before_read = before_read  # brings this worker's plainly counted numbers into the series
        self._token = config.metrics.token.encode()
        self._unset = config.metrics.closed  # the config names a key whose variable is unset
        self._page: bytes | None = None
        # The config now serving's deployments (set at start-up): which cannot serve, and why.
        self.deployments: Callable[[], Mapping[str, Deployment]] = dict
        # Snapshots of the totals, oldest first, over a little more than the window: the page's
        # first poll gets the oldest within it as a baseline, so it shows rates at once.
        self._window: deque[dict[str, Any]] = deque()
        self._sampler: asyncio.Task[None] | None = None

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/metrics", self._local(self._guarded(self.metrics)))
        if self._config.dashboard.enabled:
            app.router.add_get("/dashboard", self._local(self.dashboard))
            app.router.add_get("/dashboard/data", self._local(self._guarded(self.dashboard_data)))

    async def metrics(self, request: web.Request) -> web.Response:
        self._before_read()
        body, content_type = self._metrics.render()
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def dashboard(self, request: web.Request) -> web.Response:
        if self._page is None:
            self._page = resources.files("gateway").joinpath(_PAGE).read_bytes()
        return web.Response(body=self._page, content_type="text/html", headers={"Cache-Control": "no-cache"})

    async def dashboard_data(self, request: web.Request) -> web.Response:
        data = self._snapshot()
        baseline = next((kept for kept in self._window if data["time"] - kept["time"] <= WINDOW_S), None)
        return web.Response(body=orjson.dumps({**data, "baseline": baseline}), content_type="application/json")

    def _snapshot(self) -> dict[str, Any]:
        self._before_read()
        unavailable = {
            name: (d.provider_type, why.message(name))
            for name, d in self.deployments().items()
            if (why := d.unavailability()) is not None
        }
        return snapshot(self._metrics.registry, unavailable)

    def start_window(self) -> None:
        """Keep a snapshot every `dashboard.sample_s` (from start-up, before any page is open)."""
        if self._config.dashboard.enabled and self._sampler is None:
            self._sampler = asyncio.get_running_loop().create_task(self._keep_window())

    async def stop_window(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
            self._sampler = None

    async def _keep_window(self) -> None:
        step = self._config.dashboard.sample_s
        window = self._window
        while True:
            kept = self._snapshot()
            window.append(kept)
            while window and kept["time"] - window[0]["time"] > WINDOW_S + step:
                window.popleft()
            await asyncio.sleep(step)

    def _local(self, handler: Handler) -> Handler:
        if not self.local_only:
            return handler

        async def local(request: web.Request) -> web.StreamResponse:
            if not self.is_local(request.remote):
                error = PermissionDenied(
                    "This endpoint answers only clients on the gateway's own machine: API keys are configured "
                    "and observability.metrics.key is not. Set observability.metrics.key (scrapers then send "
                    "it as a bearer token) or observability.metrics.port to serve it elsewhere.",
                    code="metrics_local_only",
                )
                return web.Response(body=error.body(), status=error.status, content_type="application/json")
            return await handler(request)

        return local

    def _guarded(self, handler: Handler) -> Handler:
        if not self._token and not self._unset:
            return handler

        async def guarded(request: web.Request) -> web.StreamResponse:
            if self._unset:
                return _refused(
                    "This endpoint is closed: the environment variable that observability.metrics.key names "
                    "is not set on the gateway (its start-up log names it). Set it and restart the gateway.",
                    "metrics_key_unset",
                )
            given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip().encode()
            if not hmac.compare_digest(given, self._token):
                return _refused(
                    "This endpoint wants `Authorization: Bearer <observability.metrics.key>`.", "invalid_metrics_key"
                )
            return await handler(request)

        return guarded


def _refused(message: str, code: str) -> web.Response:
    error = AuthenticationFailed(message, code=code)
    return web.Response(
        body=error.body(),
        status=error.status,
        content_type="application/json",
        headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
    )


@contextlib.asynccontextmanager
async def separate_listener(
    endpoints: ObservabilityEndpoints, host: str, port: int, *, reuse_port: bool
) -> AsyncIterator[None]:
    """Serve the endpoints on host:port while the main app runs (every worker binds it: SO_REUSEPORT)."""
    app = web.Application()
    endpoints.add_routes(app)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        try:
            await web.TCPSite(runner, host, port, reuse_port=reuse_port or None).start()
        except OSError as exc:
            raise ListenError(host, port, exc, port_option="observability.metrics.port") from None
        yield
    finally:
        await runner.cleanup()
