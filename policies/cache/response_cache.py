"""The facade the pipeline calls: plan → lookup → (on a miss) fill or share a stream → replay.

    plan = cache.plan(policy=..., headers=..., deployment=..., scope=..., request=...)  # may raise 400
    found = await cache.lookup(plan)          # status HIT / MISS / REFRESH / BYPASS, entry, age_s
    if found.entry is None:
        filled = await cache.fill(plan, produce)  # a plain request: coalesced upstream call, stored when allowed
        subscription = cache.share_stream(plan, open_)  # a stream: one upstream stream for all, stored when complete

`produce` makes the upstream call and returns the complete `text_completion` body as JSON bytes,
or None when there is none to store. `open_` opens the upstream stream (see `broadcast`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.api.chat import ChatRequest
from gateway.api.embeddings import EmbeddingsRequest
from policies.cache.assemble import StreamAssembler
from policies.cache.broadcast import M, Open, SharedStream, Subscription
from policies.cache.chat_stream import ChatAssembler
from policies.cache.coalesce import SingleFlight
from policies.cache.directives import CacheDirectives, CacheStatus, parse_cache_directives
from policies.cache.entry import CacheEntry, CorruptEntry, make_entry
from policies.cache.key import AnyRequest, NativeKey, UncacheableRequest, cache_key, expected_choices, may_cache
from policies.cache.memory import MemoryCache
from policies.cache.native_events import EventsAssembler
from policies.cache.policy import CachePolicy, CacheSettings
from policies.cache.redis_tier import RedisCache
from policies.cache.tiers import TieredCache
from policies.redis_pool import RedisTarget

Produce = Callable[[], Awaitable[bytes | None]]


@dataclass(frozen=True, slots=True)
class CachePlan:
    """What the cache does for one request."""

    key: str | None  # None: the cache neither answers nor stores this request
    directives: CacheDirectives
    ttl_s: float = 0.0
    max_entry_bytes: int = 0
    shared: bool = True  # may use the Redis tier
    expected_choices: int | None = None
    usage_requested: bool = True  # the answer carries usage: a plain call, or a stream with include_usage
    chat: bool = False  # a /v1/chat/completions request: its streams are assembled as chat chunks
    native: bool = False  # a native request (`native_events`): its answer is kept as it came

    @property
    def read(self) -> bool:
        return self.key is not None and self.directives.read

    @property
    def write(self) -> bool:
        return self.key is not None and self.directives.store

    def accepts(self, entry: CacheEntry) -> bool:
        """Whether `entry` is the answer this request would get from upstream: not one assembled
        from a stream without usage when this request expects usage."""
        return not (entry.without_usage and self.usage_requested)

    def assembler(self) -> StreamAssembler:
        """An assembler for this request's stream, bounded like a stored entry (use it when `write`)."""
        if self.native:
            return EventsAssembler(max_bytes=self.max_entry_bytes)
        kind = ChatAssembler if self.chat else StreamAssembler
        return kind(expected_choices=self.expected_choices, max_bytes=self.max_entry_bytes)


BYPASS = CachePlan(key=None, directives=CacheDirectives(read=False, store=False))


@dataclass(frozen=True, slots=True)
class CacheLookup:
    status: CacheStatus  # for `x-gateway-cache-status`
    entry: CacheEntry | None = None  # set on HIT
    age_s: int = 0  # for the `Age` header on HIT


@dataclass(frozen=True, slots=True)
class Filled:
    entry: CacheEntry | None  # the answer as an entry (stored when small enough); None on BYPASS
    led: bool  # True: this caller's `produce` ran; False: shared from an identical call in flight


class ResponseCache:
    def __init__(self, tiers: TieredCache, *, clock: Callable[[], float] = time.time) -> None:
        self.tiers = tiers
        self.flights: SingleFlight[CacheEntry | None] = SingleFlight()
        self.streams: dict[str, SharedStream[Any]] = {}  # identical streams in flight, by key and usage
        self._pumps: set[asyncio.Task[None]] = set()
        self._clock = clock

    @classmethod
    def from_settings(
        cls, settings: CacheSettings, redis_url: str | RedisTarget = "", redis_prefix: str = "gateway:"
    ) -> ResponseCache:
        """Memory (unless sized 0), and Redis when `redis_url` is set (a URL, or any `RedisTarget`:
        on a cluster, entries spread over its slots), with keys under `<redis_prefix>cache:`."""
        memory = MemoryCache(settings.memory_max_bytes) if settings.memory_max_bytes else None
        redis = None
        target = RedisTarget(url=redis_url) if isinstance(redis_url, str) else redis_url
        if target.configured:
            redis = RedisCache.from_url(
                target,
                prefix=f"{redis_prefix}cache:",
                timeout_s=settings.redis_timeout_ms / 1000,
                backoff_s=settings.redis_backoff_s,
                log_interval_s=settings.log_interval_s,
            )
        return cls(TieredCache(memory, redis))

    def plan(
        self,
        *,
        policy: CachePolicy | None,
        headers: Mapping[str, str],
        deployment: str,
        scope: str,
        request: AnyRequest,
        native: NativeKey | None = None,
    ) -> CachePlan:
        """Decide what the cache does; raises `InvalidRequest` for malformed cache headers.

        `scope` is the tenant (`KeyRecord.cache_scope`: the API key's own identity, or a namespace
        an admin gave several keys in the config file): no two scopes ever share an entry. Headers
        are only read when the deployment's policy caches this request at all. `native`: the body
        (and headers) of a request sent as it came, whose answer is kept as it came (`cache_key`).
        """
        if policy is None or not may_cache(request, policy):
            return BYPASS
        directives = parse_cache_directives(headers)
        if not (directives.read or directives.store):
            return CachePlan(key=None, directives=directives)
        try:
            key = cache_key(
                deployment=deployment, scope=scope, namespace=directives.namespace, request=request, native=native
            )
        except UncacheableRequest:
            return BYPASS
        return CachePlan(
            key=key,
            directives=directives,
            ttl_s=policy.ttl_s,
            max_entry_bytes=policy.max_entry_bytes,
            shared=policy.redis,
            expected_choices=expected_choices(request),
            usage_requested=_usage_requested(request),
            chat=isinstance(request, ChatRequest),
            native=native is not None,
        )

    async def lookup(self, plan: CachePlan) -> CacheLookup:
        if plan.key is None or not plan.read:
            return CacheLookup(plan.directives.miss_status)
        entry = await self.tiers.get(plan.key, shared=plan.shared)
        if entry is None or not plan.accepts(entry):
            return CacheLookup(CacheStatus.MISS)
        age = entry.age_s(self._clock())
        max_age = plan.directives.max_age_s
        if max_age is not None and age >= max_age:
            return CacheLookup(CacheStatus.MISS)
        return CacheLookup(CacheStatus.HIT, entry, int(age))

    async def fill(self, plan: CachePlan, produce: Produce) -> Filled:
        """Run `produce` once for all identical requests in flight, and store its answer.

        A follower gets the leader's entry, or the leader's error (a copy), or `entry=None` when the
        leader finished without a storable answer (not a complete completion): it then calls upstream
        itself. If the leader is cancelled, a follower takes over with its own `produce`.
        """
        key = plan.key
        if key is None or not plan.write:
            await produce()  # BYPASS: this request's own call, never shared, never stored
            return Filled(None, led=True)

        async def lead() -> CacheEntry | None:
            body = await produce()
            return None if body is None else await self.store(plan, body)

        entry, led = await self.flights.run(key, lead)
        return Filled(entry, led)

    def share_stream(self, plan: CachePlan, open_: Open[M]) -> Subscription[M]:
        """Join the identical stream in flight, or start one with `open_` (the subscription is `led`).

        For plans that `write` (the others make their own call). Streams that differ in whether
        they asked for usage are not shared: one would get a usage chunk it did not ask for."""
        assert plan.key is not None
        assert plan.write
        key = f"{plan.key}:{'usage' if plan.usage_requested else 'plain'}"
        flight = self.streams.get(key)
        if flight is not None:
            return flight.subscribe(led=False)

        def forget(flight: SharedStream[M]) -> None:  # given the flight: a closure over it would be a cycle
            if self.streams.get(key) is flight:
                del self.streams[key]

        started: SharedStream[M] = SharedStream(
            open_, assembler=plan.assembler(), store=lambda body: self.store(plan, body), on_end=forget
        )
        self.streams[key] = started
        assert started.task is not None  # a new flight's pump
        self._pumps.add(started.task)
        started.task.add_done_callback(self._pumps.discard)
        return started.subscribe(led=True)

    async def drain(self) -> None:
        """Wait for the shared streams still running (at shutdown, before their providers close)."""
        while self._pumps:
            await asyncio.gather(*self._pumps, return_exceptions=True)

    async def store(self, plan: CachePlan, body: bytes) -> CacheEntry | None:
        """Store `body` under the plan's key when allowed and within the entry bound.

        Returns the entry (stored or not), or None when `body` is not a complete completion.
        """
        entry = self._entry(plan, body)
        if entry is not None and plan.key is not None and plan.write and len(body) <= plan.max_entry_bytes:
            await self.tiers.put(plan.key, entry, shared=plan.shared)
        return entry

    async def aclose(self) -> None:
        await self.drain()
        await self.tiers.aclose()

    def _entry(self, plan: CachePlan, body: bytes) -> CacheEntry | None:
        try:
            return make_entry(body, now=self._clock(), ttl_s=plan.ttl_s, usage_requested=plan.usage_requested)
        except CorruptEntry:
            return None


def _usage_requested(request: AnyRequest) -> bool:
    if isinstance(request, EmbeddingsRequest) or not request.stream:
        return True
    return request.stream_options is not None and bool(request.stream_options.include_usage)
