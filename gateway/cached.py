"""The cache's steps around the upstream call, for requests with a cache plan.

Lookup first. A HIT makes no upstream call (`x-gateway-attempts: 0`, with `Age`, and the
deployment the request resolved to: the route's first candidate, whose policy applied): a plain
request gets the stored JSON bytes unchanged, a streamed one gets them replayed as SSE chunks
ending with `[DONE]`. Otherwise a coalesced fill: the leader runs the usual attempts (retries and
fallbacks) and stores the answer once it is complete; a streamed answer is relayed to its client
as it arrives, assembled on the side, and stored only if it ended with `[DONE]`. Identical
requests arriving meanwhile wait for the leader and get its answer (replayed when they stream)
or its error; when it ends with nothing to share (its client left, its stream was cut), they go
again and one of them makes the call.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import orjson
from aiohttp import web

from gateway.pipeline import Pipeline, PreparedCall
from gateway.response_headers import CACHE_STATUS, OVERHEAD_MS, REQUEST_ID, ms
from gateway.streaming import relay_stream, send_stream
from policies.cache import (
    CacheEntry,
    CacheLookup,
    CachePlan,
    CacheStatus,
    ResponseCache,
    StreamAssembler,
    replay_chunks,
)
from providers.base import CompletionResult, CompletionStream

# Rounds a request waits for identical ones that end without an answer, before calling on its own.
MAX_FOLLOWS = 3


@dataclass(frozen=True, slots=True)
class Reply:
    body: bytes
    headers: dict[str, str]
    waited_s: float  # on the upstream, or on an identical request in flight: not gateway overhead


async def complete(pipeline: Pipeline, call: PreparedCall) -> Reply:
    plan = _plan(call)
    found = await pipeline.cache.lookup(plan)
    if found.entry is not None:
        return Reply(found.entry.body, _hit_headers(call, found), 0.0)
    own: CompletionResult | None = None
    headers: dict[str, str] = {}

    async def produce() -> bytes:
        nonlocal own
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


async def stream(request: web.Request, pipeline: Pipeline, call: PreparedCall, started: float) -> web.StreamResponse:
    plan = _plan(call)
    found = await pipeline.cache.lookup(plan)
    if found.entry is not None:
        return await _replay(request, call, found.entry, _hit_headers(call, found), time.perf_counter() - started)
    response: web.StreamResponse | None = None

    async def produce() -> bytes | None:
        nonlocal response
        opening = time.perf_counter()
        upstream, served = await pipeline.open_stream(call)
        opened = time.perf_counter()
        recorder = _Recorder(upstream, plan.assembler() if plan.write else None)
        headers = call.headers_from(served.deployment, served.attempts)
        headers[CACHE_STATUS] = found.status
        headers[REQUEST_ID] = call.request_id
        headers[OVERHEAD_MS] = ms((opening - started) + (time.perf_counter() - opened))
        response = await relay_stream(request, recorder, headers, call.request_id)
        return recorder.body

    began = time.perf_counter()
    shared = await _fill(pipeline.cache, plan, produce)
    if response is not None:
        return response
    assert shared is not None
    now = time.perf_counter()
    return await _replay(request, call, shared, _shared_headers(call, found.status), (now - started) - (now - began))


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
    request: web.Request, call: PreparedCall, entry: CacheEntry, headers: dict[str, str], overhead_s: float
) -> web.StreamResponse:
    payloads = replay_chunks(entry.response(), include_usage=_plan(call).usage_requested)
    headers[REQUEST_ID] = call.request_id
    headers[OVERHEAD_MS] = ms(overhead_s)
    return await send_stream(request, payloads, headers)


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
    assert call.cache is not None  # only requests with a cache plan are routed here
    return call.cache


class _Recorder:
    """The upstream stream, relayed unchanged and, when its answer may be stored, assembled on the
    side: `body` is set once it ended with `[DONE]` and assembled into a complete answer."""

    def __init__(self, stream: CompletionStream, assembler: StreamAssembler | None) -> None:
        self._stream = stream
        self._assembler = assembler
        self.body: bytes | None = None

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        assembler = self._assembler
        async for payloads in self._stream:  # raises if the stream fails or ends without [DONE]
            if assembler is not None:
                assembler.feed(payloads)
            yield payloads
        answer = None if assembler is None else assembler.finish()
        if answer is not None:
            self.body = orjson.dumps(answer)

    async def aclose(self) -> None:
        await self._stream.aclose()
