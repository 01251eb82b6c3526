"""The aiohttp application factory: wires config, providers and the pipeline; nothing imports it."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from gateway.config.loader import LoadedConfig, load_config
from gateway.console.gate import ConsoleSessions
from gateway.console.pages import ConsolePages
from gateway.http import handlers, messages, responses
from gateway.http.app_keys import MAX_BODY_BYTES, OBSERVABILITY, READINESS, SERVING
from gateway.http.middleware import envelope_middleware
from gateway.http.protocol import GatewayApplication, HttpTimeouts
from gateway.http.telemetry import TELEMETRY, Telemetry
from gateway.keys.admin import AdminServices, admin_app
from gateway.keys.throttle import API_FAILURES_PER_WINDOW, FailureThrottle
from gateway.observability.deployments_view import deployments_view
from gateway.observability.endpoints import separate_listener
from gateway.observability.metrics import multiprocess_dir
from gateway.observability.readiness import Readiness
from gateway.observability.recorder import Observability
from gateway.pipeline.assembly import SharedState
from gateway.pipeline.serving import ServingState
from gateway.requestlog.routes import RequestLogRoutes
from gateway.requestlog.service import RequestLog
from gateway.routing.attempts import Timing

log = logging.getLogger(__name__)
COMPLETION_ENDPOINTS = web.AppKey("completion_endpoints", handlers.CompletionEndpoints)
AUTH_THROTTLE = web.AppKey("auth_throttle", FailureThrottle)  # the API keys' (tests may lower or raise its limit)
REQUEST_LOG = web.AppKey("request_log", RequestLog)  # absent: the request log is off


def create_app(
    loaded: LoadedConfig,
    *,
    config_path: str | None = None,
    timing: Timing | None = None,
    host: str | None = None,
) -> web.Application:
    """`config_path`: the file to reload from (SIGHUP, file changes, the refresh header); None: no reloads.
    `timing`: clocks, sleep and randomness for the retry logic (tests inject their own).
    `host`: the address the main listener binds (default server.host), for a separate metrics listener."""
    max_body = loaded.config.server.max_body_bytes
    observability = Observability(loaded.config.observability, handlers.API_LABELS, keyed=loaded.auth_required)
    # Failed authentications: counted, and throttled per client address (one throttle per app).
    app_throttle = FailureThrottle(API_FAILURES_PER_WINDOW)
    # Metadata, the request's trace and its cost, just inside the error envelope (gateway.http.telemetry).
    telemetry = Telemetry(loaded.config.observability)
    server = loaded.config.server
    timeouts = HttpTimeouts(server.header_timeout_s, server.body_timeout_s)
    middlewares = [envelope_middleware(observability, timeouts, app_throttle), telemetry.middleware]
    app = GatewayApplication(server, timeouts, middlewares=middlewares, client_max_size=max_body)
    app[MAX_BODY_BYTES] = max_body
    app[AUTH_THROTTLE] = app_throttle
    app[OBSERVABILITY] = observability
    app[TELEMETRY] = telemetry
    if telemetry.wants_tracing:
        app.on_response_prepare.append(telemetry.on_prepare)
    request_log = RequestLog.configured(loaded.config.request_log, config_path, observability.metrics)
    if request_log is not None:
        app[REQUEST_LOG] = request_log
        observability.log_requests(request_log.queue.submit, bodies=request_log.config.include_bodies)
        app.cleanup_ctx.append(request_log.running)  # first in, last out: it outlives the requests' work
    app.cleanup_ctx.append(functools.partial(_serving_state, loaded, config_path, timing or Timing()))
    app.on_shutdown.append(functools.partial(_drain, loaded.config.server.shutdown_grace_s))
    app.cleanup_ctx.append(functools.partial(_observing, host or loaded.config.server.host))
    app.cleanup_ctx.append(functools.partial(_telemetry, loaded))
    if observability.endpoints is not None and observability.config.metrics.port is None:
        observability.endpoints.add_routes(app)
    endpoints = app[COMPLETION_ENDPOINTS] = handlers.CompletionEndpoints()
    for path in handlers.COMPLETION_PATHS:
        app.router.add_post(path, endpoints.completions)
    for path in handlers.CHAT_PATHS:
        app.router.add_post(path, endpoints.chat_completions)
    for path in handlers.EMBEDDINGS_PATHS:
        app.router.add_post(path, endpoints.embeddings)
    for path in responses.RESPONSES_PATHS:
        app.router.add_post(path, endpoints.responses)
        app.router.add_get(path + "/{response_id}", responses.retrieve)
        app.router.add_delete(path + "/{response_id}", responses.delete)
        app.router.add_get(path + "/{response_id}/input_items", responses.input_items)
        app.router.add_post(path + "/{response_id}/cancel", responses.cancel)
    for path in handlers.MESSAGES_PATHS:
        app.router.add_post(path, messages.handler(endpoints))
        app.router.add_post(path + "/count_tokens", messages.count_tokens(endpoints))
    app.router.add_get("/v1/models", handlers.list_models)
    app.router.add_get("/models", handlers.list_models)
    app.router.add_get("/health", handlers.health)
    app.router.add_get("/ready", handlers.ready)
    admin = admin_app(
        functools.partial(_admin_services, app),
        loaded.config.admin.key,
        viewer_keys=loaded.viewer_keys,
        count_failure=observability.admin_auth_failure,
        sessions=ConsoleSessions.factory(loaded.config.admin.session_ttl_s),
    )
    if admin is not None:  # the console comes with the admin API it is a face of
        RequestLogRoutes(lambda: request_log.store if request_log is not None else None).add_to(admin)
        app.add_subapp("/admin", admin)
        ConsolePages().add_routes(app)
    return app


def _admin_services(app: web.Application) -> AdminServices:
    """The stores of the config now serving (they are built at start-up, after the sub-app is mounted)."""
    serving = app[SERVING]
    gatekeeper = serving.current.pipeline.gatekeeper
    return AdminServices(
        gatekeeper.keys,
        gatekeeper.virtual,
        serving.shared.limits,
        app[TELEMETRY].spend,
        functools.partial(_deployments, app),
    )


async def _deployments(app: web.Application) -> dict[str, Any]:
    serving = app[SERVING]
    generation, shared = serving.current, serving.shared
    return await deployments_view(
        app[READINESS],
        generation.loaded.source,
        generation.pipeline.deployments,
        shared.breakers,
        shared.stats,
        shared.timing.wall(),
    )


async def _serving_state(
    loaded: LoadedConfig, config_path: str | None, timing: Timing, app: web.Application
) -> AsyncIterator[None]:
    """Providers and clients need a running loop: build them at start-up, close them at shutdown."""
    for warning in loaded.warnings:
        log.warning("%s", warning)
    loader = functools.partial(load_config, config_path) if config_path else None
    serving = ServingState(loaded, SharedState.create(loaded, timing), loader)
    app[SERVING] = app[COMPLETION_ENDPOINTS].serving = app[TELEMETRY].serving = serving
    # `limits:` applies from start-up (as the limits themselves): `closed` refuses requests while Redis is down.
    app[READINESS] = Readiness(
        loaded.config.redis.target(), redis_required=loaded.config.limits.on_redis_error == "closed"
    )
    serving.listen_for_sighup()
    watcher = None
    if config_path and loaded.config.routing.reload.watch:
        watcher = asyncio.get_running_loop().create_task(serving.watch(config_path))
    try:
        yield
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        await serving.aclose()
        await app[READINESS].aclose()


async def _drain(grace_s: float, app: web.Application) -> None:
    """SIGTERM (aiohttp has closed the listener): /ready answers 503 from now on, and the requests
    in flight get `server.shutdown_grace_s` to finish before anything they use is closed."""
    if READINESS in app:
        app[READINESS].draining = True
    if SERVING in app:
        await app[SERVING].drain(grace_s)


async def _observing(host: str, app: web.Application) -> AsyncIterator[None]:
    """The access log's writer thread, the metrics' sync task, and the metrics listener if it has its own port."""
    observability, serving = app[OBSERVABILITY], app[SERVING]
    observability.start(serving.shared, lambda: serving.current.pipeline.deployments)
    try:
        settings = observability.config.metrics
        if observability.endpoints is not None and settings.port is not None:
            async with separate_listener(
                observability.endpoints, settings.host or host, settings.port, reuse_port=bool(multiprocess_dir())
            ):
                yield
        else:
            yield
    finally:
        await observability.stop()


async def _telemetry(loaded: LoadedConfig, app: web.Application) -> AsyncIterator[None]:
    """Each worker's tracer provider (its export thread) and spend counters (their flush task)."""
    telemetry, metrics = app[TELEMETRY], app[OBSERVABILITY].metrics
    count = metrics.trace_export_errors.inc if metrics is not None else None
    telemetry.start(app[SERVING].shared.redis, loaded.config.redis.prefix, count)
    try:
        yield
    finally:
        await telemetry.stop()
