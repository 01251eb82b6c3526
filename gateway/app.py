"""The aiohttp application factory: wires config, providers and the pipeline; nothing imports it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from aiohttp import web

from gateway import handlers
from gateway.app_keys import CONFIG, MAX_BODY_BYTES, PIPELINE, READINESS
from gateway.auth import KeyAuthenticator
from gateway.config_loader import LoadedConfig, ResolvedDeployment
from gateway.middleware import envelope_middleware
from gateway.pipeline import Deployment, Pipeline
from gateway.readiness import Readiness
from gateway.routing import Router
from providers.registry import PROVIDER_TYPES

log = logging.getLogger(__name__)


def create_app(loaded: LoadedConfig) -> web.Application:
    max_body = loaded.config.server.max_body_bytes
    app = web.Application(middlewares=[envelope_middleware], client_max_size=max_body)
    app[CONFIG] = loaded
    app[MAX_BODY_BYTES] = max_body
    app.cleanup_ctx.append(_serving_state)
    for path in handlers.COMPLETION_PATHS:
        app.router.add_post(path, handlers.completions)
    app.router.add_get("/v1/models", handlers.list_models)
    app.router.add_get("/models", handlers.list_models)
    app.router.add_get("/health", handlers.health)
    app.router.add_get("/ready", handlers.ready)
    return app


async def _serving_state(app: web.Application) -> AsyncIterator[None]:
    """Providers and clients need a running loop: build them at start-up, close them at shutdown."""
    loaded = app[CONFIG]
    for warning in loaded.warnings:
        log.warning("%s", warning)
    deployments = {name: _build_deployment(resolved) for name, resolved in loaded.deployments.items()}
    router = Router((d.config.name, d.config.aliases) for d in loaded.deployments.values())
    app[PIPELINE] = Pipeline(KeyAuthenticator(loaded.client_keys, required=loaded.auth_required), router, deployments)
    app[READINESS] = Readiness(loaded.config.redis.url)
    try:
        yield
    finally:
        for deployment in deployments.values():
            if deployment.provider is not None:
                await deployment.provider.aclose()
        await app[READINESS].aclose()


def _build_deployment(resolved: ResolvedDeployment) -> Deployment:
    config = resolved.config
    provider = None
    if resolved.unavailable is None:
        provider = PROVIDER_TYPES[config.provider.type].create(config.name, resolved.options, resolved.credential)
    return Deployment(
        name=config.name,
        provider_type=config.provider.type,
        timeout_s=config.timeout_s,
        provider=provider,
        unavailable=resolved.unavailable,
    )
