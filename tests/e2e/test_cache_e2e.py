"""The response cache through the running gateway, with real Redis and the official `openai` SDK:
statuses and headers, refresh, bypass, max-age, tenants and namespaces, streams replayed."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from gateway.pipeline.streaming import REPLAY_BATCH
from tests.conftest import GatewayFactory, deployment
from tests.support.cache_e2e_helpers import KEYS_ENV, STATUS, answer_text, body, cache_config, post, sdk, sdk_stream
from tests.support.fake_upstream import FakeUpstream


@pytest.fixture
async def cached(make_gateway: GatewayFactory, upstream: FakeUpstream, redis_url: str, redis_prefix: str) -> TestServer:
    """An open gateway whose one deployment caches, in memory and in Redis."""
    return await make_gateway(cache_config(upstream, redis_url=redis_url, prefix=redis_prefix))


async def test_a_repeated_request_is_a_hit_without_an_upstream_call(cached: TestServer, upstream: FakeUpstream) -> None:
    async with sdk(cached) as client:
        first = await client.completions.with_raw_response.create(**body())
        second = await client.completions.with_raw_response.create(**body())

    assert first.headers[STATUS] == "MISS"
    assert first.headers["x-gateway-attempts"] == "1"
    assert "Age" not in first.headers
    assert second.headers[STATUS] == "HIT"
    assert second.headers["x-gateway-attempts"] == "0"  # no upstream call
    assert second.headers["x-gateway-deployment"] == "fake"
    assert int(second.headers["Age"]) >= 0
    assert second.parse().model_dump() == first.parse().model_dump()
    assert len(upstream.received) == 1


async def test_a_plain_hit_is_the_stored_json_byte_for_byte(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    miss = await post(http, cached, body())
    await asyncio.sleep(1.05)  # the fake upstream stamps `created` per second: a new call would differ
    hit = await post(http, cached, body())

    assert (miss.cache, hit.cache) == ("MISS", "HIT")
    assert hit.raw == miss.raw
    assert hit.headers["Content-Type"].startswith("application/json")
    assert int(hit.headers["Age"]) >= 1
    assert len(upstream.received) == 1


@pytest.mark.parametrize(
    "refresh", [{"Cache-Control": "no-cache"}, {"x-portkey-cache-force-refresh": "true"}], ids=["no-cache", "portkey"]
)
async def test_refresh_asks_upstream_again_and_stores_the_new_answer(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession, refresh: dict[str, str]
) -> None:
    upstream.script(answer_text("first answer"), answer_text("second answer"))
    await post(http, cached, body())
    refreshed = await post(http, cached, body(), refresh)
    after = await post(http, cached, body())

    assert (refreshed.cache, refreshed.text) == ("REFRESH", "second answer")
    assert (after.cache, after.text) == ("HIT", "second answer")
    assert len(upstream.received) == 2


async def test_no_store_bypasses_the_cache_both_ways(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    upstream.script(answer_text("stored"), answer_text("bypassed"), answer_text("bypassed again"))
    await post(http, cached, body())
    bypassed = await post(http, cached, body(), {"Cache-Control": "no-store"})
    bypassed_first = await post(http, cached, body("never stored"), {"Cache-Control": "no-store"})
    after = await post(http, cached, body())

    assert (bypassed.cache, bypassed.text) == ("BYPASS", "bypassed")
    assert bypassed_first.cache == "BYPASS"
    assert (after.cache, after.text) == ("HIT", "stored")  # the bypass neither read nor replaced it
    assert (await post(http, cached, body("never stored"))).cache == "MISS"


async def test_max_age_accepts_only_younger_entries(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    upstream.script(answer_text("old"), answer_text("new"))
    started = time.monotonic()
    await post(http, cached, body())
    await asyncio.sleep(1.05)
    young_enough = await post(http, cached, body(), {"Cache-Control": "max-age=60"})
    took_s = time.monotonic() - started  # about 1 s, more on a loaded machine
    too_old = await post(http, cached, body(), {"Cache-Control": "max-age=1"})

    assert (young_enough.cache, young_enough.text) == ("HIT", "old")
    assert 1 <= int(young_enough.headers["Age"]) <= took_s  # the entry's age in whole seconds
    assert (too_old.cache, too_old.text) == ("MISS", "new")
    assert (await post(http, cached, body())).text == "new"  # the younger answer replaced the old one


async def test_malformed_cache_headers_are_a_400_naming_the_header(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    bad_age = await post(http, cached, body(), {"Cache-Control": "max-age=soon"})
    bad_flag = await post(http, cached, body(), {"x-portkey-cache-force-refresh": "yes"})

    assert (bad_age.status, bad_age.json["error"]["param"]) == (400, "Cache-Control")
    assert (bad_flag.status, bad_flag.json["error"]["param"]) == (400, "x-portkey-cache-force-refresh")
    assert upstream.received == []


async def test_two_api_keys_never_share_an_entry(
    make_gateway: GatewayFactory, upstream: FakeUpstream, redis_url: str, redis_prefix: str
) -> None:
    config = cache_config(upstream, redis_url=redis_url, prefix=redis_prefix, keys=True)
    gateway = await make_gateway(config, KEYS_ENV)
    upstream.script(answer_text("for team a"), answer_text("for team b"))
    async with sdk(gateway, KEYS_ENV["TEAM_A_KEY"]) as team_a, sdk(gateway, KEYS_ENV["TEAM_B_KEY"]) as team_b:
        a_first = await team_a.completions.with_raw_response.create(**body())
        b_first = await team_b.completions.with_raw_response.create(**body())
        a_again = await team_a.completions.with_raw_response.create(**body())
        b_again = await team_b.completions.with_raw_response.create(**body())

    assert [r.headers[STATUS] for r in (a_first, b_first, a_again, b_again)] == ["MISS", "MISS", "HIT", "HIT"]
    assert a_again.parse().choices[0].text == "for team a"
    assert b_again.parse().choices[0].text == "for team b"
    assert len(upstream.received) == 2


async def test_namespaces_partition_a_callers_entries(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    one = {"x-gateway-cache-namespace": "one"}
    statuses = [
        (await post(http, cached, body(), one)).cache,
        (await post(http, cached, body(), {"x-gateway-cache-namespace": "two"})).cache,
        (await post(http, cached, body())).cache,
        (await post(http, cached, body(), {"x-portkey-cache-namespace": "one"})).cache,  # the same namespace
    ]

    assert statuses == ["MISS", "MISS", "MISS", "HIT"]
    assert len(upstream.received) == 3


async def test_a_replayed_stream_gives_the_sdk_the_original_text_in_several_chunks(cached: TestServer) -> None:
    async with sdk(cached) as client:
        original, first_status, _, _ = await sdk_stream(client, prompt="one two three four five")
        replayed, second_status, chunks, _ = await sdk_stream(client, prompt="one two three four five")

    assert (first_status, second_status) == ("MISS", "HIT")
    assert replayed == original == "echo: one two three four five "
    assert len(chunks) > 3  # replayed as a stream, not as one chunk


async def test_a_long_replay_is_written_in_batches_and_arrives_whole(cached: TestServer) -> None:
    prompt = " ".join(f"word{i}" for i in range(150))  # more pieces than one write of a replay holds
    async with sdk(cached) as client:
        original, _, _, _ = await sdk_stream(client, prompt=prompt)
        replayed, status, chunks, _ = await sdk_stream(client, prompt=prompt)

    assert status == "HIT"
    assert replayed == original
    assert len(chunks) > 2 * REPLAY_BATCH


async def test_a_streamed_miss_serves_a_later_plain_hit_with_the_same_text(
    cached: TestServer, upstream: FakeUpstream
) -> None:
    async with sdk(cached) as client:
        streamed, _, _, _ = await sdk_stream(client, stream_options={"include_usage": True})
        plain = await client.completions.with_raw_response.create(**body())

    assert plain.headers[STATUS] == "HIT"
    completion = plain.parse()
    assert completion.choices[0].text == streamed
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert len(upstream.received) == 1


async def test_a_stream_without_usage_is_not_given_to_a_plain_request(
    cached: TestServer, upstream: FakeUpstream
) -> None:
    async with sdk(cached) as client:
        await sdk_stream(client)  # stored without usage: it was not asked for
        plain = await client.completions.with_raw_response.create(**body())
        plain_again = await client.completions.with_raw_response.create(**body())
        _, streamed_status, _, usage = await sdk_stream(client, stream_options={"include_usage": True})

    assert plain.headers[STATUS] == "MISS"  # a plain answer carries usage: this one would not have
    assert plain.parse().usage is not None
    assert plain_again.headers[STATUS] == "HIT"
    assert streamed_status == "HIT"
    assert usage == plain.parse().usage.model_dump()  # type: ignore[union-attr]
    assert len(upstream.received) == 2


async def test_a_deployment_without_a_cache_policy_is_never_cached(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await make_gateway({"deployments": [deployment("fake", upstream.base_url)]})
    first = await post(http, gateway, body(), {"Cache-Control": "max-age=oops"})  # not read without a policy
    second = await post(http, gateway, body())

    assert (first.status, second.status) == (200, 200)
    assert STATUS not in first.headers
    assert len(upstream.received) == 2


async def test_a_policy_may_keep_sampled_requests_out_of_the_cache(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await make_gateway(cache_config(upstream, policy={"cache_nonzero_temperature": False}))
    sampled = [(await post(http, gateway, body(temperature=0.7))).cache for _ in range(2)]
    greedy = [(await post(http, gateway, body(temperature=0))).cache for _ in range(2)]

    assert sampled == ["BYPASS", "BYPASS"]
    assert greedy == ["MISS", "HIT"]
    assert len(upstream.received) == 3
