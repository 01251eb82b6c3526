"""The cache as the pipeline uses it: statuses, Age, refresh, bypass, max-age, tenants,
streamed misses, and coalesced identical requests."""

from __future__ import annotations

import asyncio
from itertools import zip_longest
from typing import Any

import orjson
import pytest
from multidict import CIMultiDict

from gateway.api.errors import InvalidRequest, UpstreamError
from gateway.api.schemas import CompletionRequest
from policies.cache import (
    CachePlan,
    CachePolicy,
    CacheSettings,
    CacheStatus,
    MemoryCache,
    ResponseCache,
    TieredCache,
    replay_chunks,
)
from tests.support.cache_samples import completion, openai_stream, raw, usage_event
from tests.support.fake_clock import FakeClock

HIT, MISS, REFRESH, BYPASS = CacheStatus.HIT, CacheStatus.MISS, CacheStatus.REFRESH, CacheStatus.BYPASS
DEFAULT_POLICY = CachePolicy()
BODY: dict[str, Any] = {"model": "instruct", "prompt": "Say hello", "temperature": 0}


class Upstream:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self) -> bytes:
        self.calls += 1
        return raw(completion(f"answer {self.calls}"))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_700_000_000.0)


@pytest.fixture
def cache(clock: FakeClock) -> ResponseCache:
    return ResponseCache(TieredCache(MemoryCache(10_000_000, clock=clock)), clock=clock)


def plan_for(
    cache: ResponseCache,
    headers: dict[str, str] | None = None,
    *,
    policy: CachePolicy | None = DEFAULT_POLICY,
    scope: str = "team-a",
    deployment: str = "instruct",
    **body: Any,
) -> CachePlan:
    request = CompletionRequest.model_validate({**BODY, **body})
    return cache.plan(
        policy=policy,
        headers=CIMultiDict(headers or {}),
        deployment=deployment,
        scope=scope,
        request=request,
    )


async def serve(cache: ResponseCache, plan: CachePlan, upstream: Upstream) -> tuple[CacheStatus, str, int]:
    """What a client sees: the cache status, the text, the Age header."""
    found = await cache.lookup(plan)
    if found.entry is not None:
        return found.status, found.entry.response()["choices"][0]["text"], found.age_s
    filled = await cache.fill(plan, upstream)
    text = f"answer {upstream.calls}" if filled.entry is None else filled.entry.response()["choices"][0]["text"]
    return found.status, text, 0


async def test_miss_then_hit_with_age(cache: ResponseCache, clock: FakeClock) -> None:
    upstream = Upstream()
    assert await serve(cache, plan_for(cache), upstream) == (MISS, "answer 1", 0)
    clock.now += 42.7
    assert await serve(cache, plan_for(cache), upstream) == (HIT, "answer 1", 42)
    assert upstream.calls == 1


async def test_entries_expire_after_the_policy_ttl(cache: ResponseCache, clock: FakeClock) -> None:
    upstream, policy = Upstream(), CachePolicy(ttl_s=60)
    await serve(cache, plan_for(cache, policy=policy), upstream)
    clock.now += 60
    assert await serve(cache, plan_for(cache, policy=policy), upstream) == (MISS, "answer 2", 0)


@pytest.mark.parametrize(
    "headers",
    [{"Cache-Control": "no-cache"}, {"x-portkey-cache-force-refresh": "true"}, {"Cache-Control": "max-age=0"}],
)
async def test_refresh_skips_the_read_and_stores_the_new_answer(cache: ResponseCache, headers: dict[str, str]) -> None:
    upstream = Upstream()
    await serve(cache, plan_for(cache), upstream)
    status, text, _ = await serve(cache, plan_for(cache, headers), upstream)
    assert text == "answer 2"
    assert status in (REFRESH, MISS)
    assert await serve(cache, plan_for(cache), upstream) == (HIT, "answer 2", 0)


async def test_no_store_neither_reads_nor_stores(cache: ResponseCache) -> None:
    upstream = Upstream()
    await serve(cache, plan_for(cache), upstream)
    assert await serve(cache, plan_for(cache, {"Cache-Control": "no-store"}), upstream) == (BYPASS, "answer 2", 0)
    assert await serve(cache, plan_for(cache), upstream) == (HIT, "answer 1", 0)  # untouched by the bypass


async def test_max_age_accepts_only_younger_entries(cache: ResponseCache, clock: FakeClock) -> None:
    upstream = Upstream()
    await serve(cache, plan_for(cache), upstream)
    clock.now += 10
    assert await serve(cache, plan_for(cache, {"Cache-Control": "max-age=20"}), upstream) == (HIT, "answer 1", 10)
    assert await serve(cache, plan_for(cache, {"Cache-Control": "max-age=10"}), upstream) == (MISS, "answer 2", 0)
    assert await serve(cache, plan_for(cache), upstream) == (HIT, "answer 2", 0)


async def test_namespaces_tenants_and_deployments_never_share_an_entry(cache: ResponseCache) -> None:
    upstream = Upstream()
    await serve(cache, plan_for(cache, {"x-gateway-cache-namespace": "one"}), upstream)
    variants = [
        plan_for(cache, {"x-gateway-cache-namespace": "two"}),
        plan_for(cache),
        plan_for(cache, {"x-portkey-cache-namespace": "one"}, scope="team-b"),
        plan_for(cache, {"x-gateway-cache-namespace": "one"}, deployment="other"),
    ]
    for plan in variants:
        assert (await serve(cache, plan, upstream))[0] == MISS
    assert upstream.calls == 5
    assert (await serve(cache, plan_for(cache, {"x-portkey-cache-namespace": "one"}), upstream))[0] == HIT


async def test_uncached_requests_are_bypassed(cache: ResponseCache) -> None:
    upstream = Upstream()
    no_policy = plan_for(cache, policy=None)
    sampled = plan_for(cache, policy=CachePolicy(cache_nonzero_temperature=False), temperature=0.8)
    disabled = plan_for(cache, policy=CachePolicy(enabled=False))
    for plan in (no_policy, sampled, disabled, no_policy):
        assert (await serve(cache, plan, upstream))[0] == BYPASS
    assert upstream.calls == 4


async def test_headers_are_validated_when_the_cache_applies(cache: ResponseCache) -> None:
    with pytest.raises(InvalidRequest) as caught:
        plan_for(cache, {"Cache-Control": "max-age=soon"})
    assert caught.value.param == "Cache-Control"
    plan_for(cache, {"Cache-Control": "max-age=soon"}, policy=CachePolicy(enabled=False))  # ignored: no cache


async def test_a_stream_miss_is_stored_and_served_to_plain_and_streamed_hits(cache: ResponseCache) -> None:
    upstream_body = completion("The streamed answer, in several chunks.", "A second choice.")
    plan = plan_for(cache, stream=True, n=2)
    relayed: list[bytes] = []

    async def relay_stream() -> bytes | None:
        assembler = plan.assembler()
        first, second = openai_stream(upstream_body)
        for batch in zip_longest(first, second):  # one upstream read, up to two events
            payloads = [orjson.dumps(event) for event in batch if event is not None]
            relayed.extend(payloads)  # written to the client as they arrive
            assembler.feed(payloads)
        assembler.feed([orjson.dumps(usage_event(upstream_body))])
        body = assembler.finish()  # the stream ended with [DONE]
        return None if body is None else orjson.dumps(body)

    assert (await cache.lookup(plan)).status == MISS
    await cache.fill(plan, relay_stream)
    plain = await cache.lookup(plan_for(cache, n=2))
    assert plain.status == HIT
    assert plain.entry is not None
    assert plain.entry.response() == upstream_body  # the JSON a non-streamed miss returns
    replayed = [orjson.loads(chunk) for chunk in replay_chunks(plain.entry.response(), include_usage=True)]
    texts = ["", ""]
    for event in replayed:
        for choice in event["choices"]:
            texts[choice["index"]] += choice["text"]
    assert texts == [choice["text"] for choice in upstream_body["choices"]]
    assert replayed[-1]["usage"] == upstream_body["usage"]


async def test_a_stream_cut_by_the_upstream_is_not_stored(cache: ResponseCache) -> None:
    plan = plan_for(cache, stream=True)

    async def cut_stream() -> bytes | None:
        assembler = plan.assembler()
        events = openai_stream(completion("This stream will be cut"))[0]
        assembler.feed([orjson.dumps(event) for event in events[:3]])
        raise UpstreamError("The upstream closed the stream before it finished.")

    with pytest.raises(UpstreamError):
        await cache.fill(plan, cut_stream)
    assert (await cache.lookup(plan)).status == MISS


async def test_an_unfinished_stream_is_not_stored(cache: ResponseCache) -> None:
    plan = plan_for(cache, stream=True, n=2)

    async def one_choice_unfinished() -> bytes | None:
        assembler = plan.assembler()
        first, second = openai_stream(completion("done", "never finished"))
        assembler.feed([orjson.dumps(event) for event in [*first, *second[:-1]]])
        body = assembler.finish()
        return None if body is None else orjson.dumps(body)

    filled = await cache.fill(plan, one_choice_unfinished)
    assert filled.entry is None
    assert (await cache.lookup(plan)).status == MISS


async def test_error_bodies_and_oversized_answers_are_not_stored(cache: ResponseCache) -> None:
    plan = plan_for(cache)

    async def error_body() -> bytes:
        return raw({"error": {"message": "nope"}})

    assert (await cache.fill(plan, error_body)).entry is None
    small = plan_for(cache, policy=CachePolicy(max_entry_bytes=200))

    async def big() -> bytes:
        return raw(completion("x" * 500))

    filled = await cache.fill(small, big)
    assert filled.entry is not None  # still given to identical requests in flight
    assert (await cache.lookup(small)).status == MISS


async def test_ten_identical_concurrent_misses_reach_the_upstream_once(cache: ResponseCache) -> None:
    release = asyncio.Event()
    calls = 0

    async def slow_upstream() -> bytes:
        nonlocal calls
        calls += 1
        await release.wait()
        return raw(completion("shared"))

    async def client() -> tuple[CacheStatus, bool, str]:
        plan = plan_for(cache)
        found = await cache.lookup(plan)
        filled = await cache.fill(plan, slow_upstream)
        assert filled.entry is not None
        return found.status, filled.led, filled.entry.response()["choices"][0]["text"]

    tasks = [asyncio.create_task(client()) for _ in range(10)]
    await asyncio.sleep(0.01)
    release.set()
    results = await asyncio.gather(*tasks)
    assert calls == 1
    assert {(status, text) for status, _, text in results} == {(MISS, "shared")}
    assert sum(led for _, led, _ in results) == 1
    assert (await cache.lookup(plan_for(cache))).status == HIT


async def test_followers_of_a_leader_without_an_answer_call_upstream_themselves(cache: ResponseCache) -> None:
    release = asyncio.Event()

    async def client_left() -> bytes | None:
        await release.wait()
        return None  # the leader's client went away mid-stream: nothing complete to share

    leader = asyncio.create_task(cache.fill(plan_for(cache), client_left))
    follower = asyncio.create_task(cache.fill(plan_for(cache), Upstream()))
    await asyncio.sleep(0.01)
    release.set()
    assert (await leader).entry is None
    filled = await follower
    assert (filled.entry, filled.led) == (None, False)  # the pipeline then makes its own call


def test_built_from_settings_without_redis_is_memory_only() -> None:
    cache = ResponseCache.from_settings(CacheSettings(memory_max_bytes=1000))
    assert cache.tiers.redis is None
    assert cache.tiers.memory is not None
    assert cache.tiers.memory.max_bytes == 1000
    assert ResponseCache.from_settings(CacheSettings(memory_max_bytes=0)).tiers.memory is None
