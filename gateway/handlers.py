"""HTTP handlers: read, call the pipeline, render. No policy decisions live here."""

from __future__ import annotations

import time

import orjson
from aiohttp import web

from gateway.app_keys import CONFIG, PIPELINE, READINESS, REQUEST_ID
from gateway.errors import GatewayError
from gateway.pipeline import PreparedCall
from gateway.request_parsing import decode_json_object
from gateway.streaming import relay_stream

COMPLETION_PATHS = ("/v1/completions", "/completions", "/ai-proxy/completions")


async def completions(request: web.Request) -> web.StreamResponse:
    started = time.perf_counter()
    pipeline = request.app[PIPELINE]
    request_id = request[REQUEST_ID]
    principal = pipeline.authenticate(request.headers)
    payload = decode_json_object(await request.read(), request.content_type)
    call = pipeline.prepare(principal, request.headers, payload, request_id)
    headers = {"x-gateway-deployment": call.deployment.name, "x-gateway-provider": call.deployment.provider_type}
    upstream_started = time.perf_counter()
    try:
        if call.stream:
            return await _stream(request, call, headers, started, upstream_started)
        result = await pipeline.complete(call)
    except GatewayError as exc:
        exc.headers.update(headers)
        raise
    finished = time.perf_counter()
    headers["x-gateway-overhead-ms"] = _ms((upstream_started - started) + (time.perf_counter() - finished))
    return web.Response(body=result.raw, content_type="application/json", headers=headers)


async def _stream(
    request: web.Request, call: PreparedCall, headers: dict[str, str], started: float, upstream_started: float
) -> web.StreamResponse:
    stream = await request.app[PIPELINE].open_stream(call)
    opened = time.perf_counter()
    headers["x-request-id"] = request[REQUEST_ID]
    headers["x-gateway-overhead-ms"] = _ms((upstream_started - started) + (time.perf_counter() - opened))
    return await relay_stream(request, stream, headers, request[REQUEST_ID])


async def list_models(request: web.Request) -> web.Response:
    pipeline = request.app[PIPELINE]
    principal = pipeline.authenticate(request.headers)
    data = [
        {
            "id": model,
            "object": "model",
            "created": 0,
            "owned_by": deployment.provider_type,
            "deployment": deployment.name,
        }
        for model, deployment in pipeline.models_for(principal)
    ]
    return _json({"object": "list", "data": data})


async def health(request: web.Request) -> web.Response:
    return _json({"status": "ok"})


async def ready(request: web.Request) -> web.Response:
    deployments = request.app[PIPELINE].deployments.values()
    available = [d.name for d in deployments if d.provider is not None]
    unavailable = {d.name: d.unavailable for d in deployments if d.provider is None}
    redis = await request.app[READINESS].redis_status()
    is_ready = bool(available) and redis in ("ok", "not configured")
    body = {
        "status": "ready" if is_ready else "not ready",
        "config": request.app[CONFIG].source,
        "redis": redis,
        "deployments": {"available": available, "unavailable": unavailable},
    }
    return _json(body, status=200 if is_ready else 503)


def _json(body: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"
