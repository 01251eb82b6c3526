"""The cache's steps around the upstream call, for requests with a cache plan.

Lookup first. A HIT makes no upstream call (`x-gateway-attempts: 0`, with `Age`, and the
deployment the request resolved to: the route's first candidate, whose policy applied): a plain
request gets the stored JSON bytes unchanged, a streamed one gets them replayed as SSE chunks
ending with `[DONE]`.

Otherwise the identical requests in flight share one upstream call. A plain request runs a
coalesced fill: the leader runs the usual attempts (retries and fallbacks) and stores the answer;
identical plain requests arriving meanwhile wait for it and get its answer or its error; when it
ends with nothing to share (its client left), they go again and one of them makes the call. A
streamed request joins the identical stream in flight, or starts one (`ResponseCache.share_stream`):
every subscriber gets the upstream's events as they arrive, and the answer, assembled on the side,
is stored once the stream ended with `[DONE]`, before any client sees that end.

Everything a client waits on here is inside its `ClientScope.cancellable()` stretch, and nothing
that must outlive the client (the cache write, the settlement) is.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from gateway.api.response_headers import CACHE_STATUS, OVERHEAD_MS, REQUEST_ID, ms
from gateway.pipeline.exchange import ClientScope
from gateway.pipeline.flow import Pipeline, PreparedCall
from gateway.pipeline.streaming import relay_stream, send_stream
from policies.cache import CacheEntry, CacheLookup, CachePlan, CacheStatus, ResponseCache, replay_chunks
from policies.cache.key import credential_partition
from providers.base import CompletionResult

# Rounds a request waits for identical ones that end without an answer, before calling on its own.
MAX_FOLLOWS = 3


@dataclass(frozen=True, slots=True)
class Reply:
    body: bytes
    headers: dict[str, str]
    waited_s: float  # on the upstream, or on an identical request in flight: not gateway overhead


async def complete(pipeline: Pipeline, call: PreparedCall, scope: ClientScope) -> Reply:
    plan = _plan(call)
    found = await pipeline.cache.lookup(plan)
    if found.entry is not None:
        return Reply(found.entry.body, _hit_headers(call, found), 0.0)
    own: CompletionResult | None = None
    headers: dict[str, str] = {}

    async def produce() -> bytes:
        nonlocal own
        with scope.cancellable():  # the store that follows is not: it outlives the client
            own, served = await pipeline.complete(call)
        headers.update(call.headers_from(served.deployment, served.attempts))
        return own.raw

    began = time.perf_counter()
    shared = await _fill(pipeline.cache, plan, produce)
    waited = time.perf_counter() - began
    if own is not None:
        return Reply(own.raw, {**headers, CACHE_STATUS: found.status}, waited)
    assert shared is not None
    return Reply(shared.body, _shared_headers(call, found.status), waited)


async def stream(
    request: web.Request, pipeline: Pipeline, call: PreparedCall, scope: ClientScope, started: float
) -> web.StreamResponse:
    plan = _plan(call)
    found = await pipeline.cache.lookup(plan)
    if found.entry is not None:
        await scope.settle()  # no upstream call to charge: the slots are free before the replay
        return await _replay(
            request, call, scope, found.entry, _hit_headers(call, found), time.perf_counter() - started
        )
    if not plan.write:  # never stored, so never shared: its own call
        return await relay_own(request, pipeline, call, scope, started, {CACHE_STATUS: found.status})
    joined = time.perf_counter()
    subscription = pipeline.cache.share_stream(plan, functools.partial(pipeline.open_stream, call))
    if subscription.led:  # its call is the one made: settled once the upstream is done, whoever stays
        scope.settle_after(subscription.ended)
    try:
        with scope.cancellable():
            served = await subscription.opened()
    except BaseException:
        subscription.leave()
        raise
    opened = time.perf_counter()
    if subscription.led:
        headers = call.headers_from(served.deployment, served.attempts)
    else:  # no upstream call of its own: the deployment that serves the shared stream, 0 attempts
        headers = {**call.headers_from(served.deployment, 0), **served.route}
    headers[CACHE_STATUS] = found.status
    headers[REQUEST_ID] = call.request_id
    headers[OVERHEAD_MS] = ms((joined - started) + (time.perf_counter() - opened))
    scope.headers = headers
    shared = subscription if call.render is None else call.render.stream(subscription, scope)
    return await relay_stream(request, shared, scope, call.request_id)


async def relay_own(
    request: web.Request,
    pipeline: Pipeline,
    call: PreparedCall,
    scope: ClientScope,
    started: float,
    extra: dict[str, str],
) -> web.StreamResponse:
    """A stream with its own upstream call, shared with nobody (no cache, or one that stores nothing)."""
    upstream_started = time.perf_counter()
    with scope.cancellable():
        upstream, served = await pipeline.open_stream(call)
    opened = time.perf_counter()
    headers = {**call.headers_from(served.deployment, served.attempts), **extra}
    headers[REQUEST_ID] = call.request_id
    headers[OVERHEAD_MS] = ms((upstream_started - started) + (time.perf_counter() - opened))
    scope.headers = headers
    if call.render is not None:
        upstream = call.render.stream(upstream, scope)
    return await relay_stream(request, upstream, scope, call.request_id)


async def _fill(
    cache: ResponseCache, plan: CachePlan, produce: Callable[[], Awaitable[bytes | None]]
) -> CacheEntry | None:
    """Run `produce` once for all identical requests in flight. Returns the entry another request's
    call made for this one, or None when this request's own `produce` ran."""
    for _ in range(MAX_FOLLOWS):
        filled = await cache.fill(plan, produce)
        if filled.led:
            return None
        if filled.entry is not None and plan.accepts(filled.entry):
            return filled.entry
    body = await produce()
    if body is not None:
        await cache.store(plan, body)
    return None


async def _replay(
    request: web.Request,
    call: PreparedCall,
    scope: ClientScope,
    entry: CacheEntry,
    headers: dict[str, str],
    overhead_s: float,
) -> web.StreamResponse:
    payloads = replay_chunks(entry.response(), include_usage=_plan(call).usage_requested)
    if call.render is not None:
        payloads = await call.render.replayed(payloads, scope)
    headers[REQUEST_ID] = call.request_id
    headers[OVERHEAD_MS] = ms(overhead_s)
    scope.headers = headers
    with scope.cancellable():
        response = await send_stream(request, payloads, headers, scope.first_byte, scope.framing)
    scope.delivered = True
    return response


def _hit_headers(call: PreparedCall, found: CacheLookup) -> dict[str, str]:
    headers = _shared_headers(call, found.status)
    headers["Age"] = str(found.age_s)
    return headers


def _shared_headers(call: PreparedCall, status: CacheStatus) -> dict[str, str]:
    """No upstream call was made for this request: it is reported against the deployment it resolved to."""
    headers = call.headers_from(call.plan.tiers[0].members[0], 0)
    headers[CACHE_STATUS] = status
    return headers


def _plan(call: PreparedCall) -> CachePlan:
    """The request's cache plan, in the partition of the credential that answers it: an answer
    made with a virtual key's credential is never served to the deployment's own, nor the reverse."""
    plan = call.cache
    assert plan is not None  # only requests with a cache plan are routed here
    if plan.key is None or call.credential is None:
        return plan
    return dataclasses.replace(plan, key=credential_partition(plan.key, call.credential.name))
