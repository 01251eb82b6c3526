"""/metrics, /dashboard and /dashboard/data: on the main port, or on a listener of their own.

With `observability.metrics.key` set, /metrics and /dashboard/data want `Authorization: Bearer
<key>`; the dashboard page itself holds no data, and asks for the key when its data is refused.
"""

from __future__ import annotations

import contextlib
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources

import orjson
from aiohttp import web

from gateway.dashboard import snapshot
from gateway.metrics import GatewayMetrics
from gateway.observability_config import ObservabilityConfig

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_PAGE = "static/dashboard.html"


class ObservabilityEndpoints:
    def __init__(self, config: ObservabilityConfig, metrics: GatewayMetrics, before_read: Callable[[], None]) -> None:
        self._config = config
        self._metrics = metrics
        self._before_read = before_read  # brings this worker's plainly counted numbers into the series
        self._token = config.metrics.token.encode()
        self._page: bytes | None = None

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/metrics", self._guarded(self.metrics))
        if self._config.dashboard.enabled:
            app.router.add_get("/dashboard", self.dashboard)
            app.router.add_get("/dashboard/data", self._guarded(self.dashboard_data))

    async def metrics(self, request: web.Request) -> web.Response:
        self._before_read()
        body, content_type = self._metrics.render()
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def dashboard(self, request: web.Request) -> web.Response:
        if self._page is None:
            self._page = resources.files("gateway").joinpath(_PAGE).read_bytes()
        return web.Response(body=self._page, content_type="text/html", headers={"Cache-Control": "no-cache"})

    async def dashboard_data(self, request: web.Request) -> web.Response:
        self._before_read()
        return web.Response(body=orjson.dumps(snapshot(self._metrics.registry)), content_type="application/json")

    def _guarded(self, handler: Handler) -> Handler:
        if not self._token:
            return handler

        async def guarded(request: web.Request) -> web.StreamResponse:
            given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip().encode()
            if not hmac.compare_digest(given, self._token):
                return web.json_response(
                    {"error": {"message": "This endpoint wants `Authorization: Bearer <observability.metrics.key>`."}},
                    status=401,
                    headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
                )
            return await handler(request)

        return guarded


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
        await web.TCPSite(runner, host, port, reuse_port=reuse_port or None).start()
        yield
    finally:
        await runner.cleanup()
