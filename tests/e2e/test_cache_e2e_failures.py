"""The cache through the running gateway when things go wrong or run at once: cut streams and
upstream errors are never stored, identical misses share one upstream call, Redis stopped
mid-test leaves the gateway answering, replicas share entries, reloads keep them."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import openai
import pytest
import redis.asyncio as aioredis
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from tests.conftest import GatewayFactory
from tests.support.cache_e2e_helpers import (
    STATUS,
    arrivals,
    body,
    cache_config,
    failing_after,
    held_failure,
    own_redis,
    post,
    sdk,
    sdk_stream,
)
from tests.support.fake_upstream import FakeUpstream, stream, stream_then_drop
from tests.support.redis_helpers import redis_client
from tests.support.routing_helpers import eventually, start_gateway_from_file, write_config
from tests.support.stream_helpers import Gate


@pytest.fixture
async def cached(make_gateway: GatewayFactory, upstream: FakeUpstream, redis_url: str, redis_prefix: str) -> TestServer:
    return await make_gateway(cache_config(upstream, redis_url=redis_url, prefix=redis_prefix))


@pytest.mark.parametrize(
    "cut",
    [stream(["never ", "finished "], done=False), stream_then_drop(["dropped ", "midway "])],
    ids=["no-done", "connection-dropped"],
)
async def test_a_stream_cut_by_the_upstream_is_not_stored(
    cached: TestServer, upstream: FakeUpstream, cut: object
) -> None:
    upstream.script(cut)  # type: ignore[arg-type]
    async with sdk(cached) as client:
        with pytest.raises(openai.APIError):
            await sdk_stream(client)
        text, status, _, _ = await sdk_stream(client)

    assert status == "MISS"  # the next identical request reached the upstream
    assert text == "echo: Say this is a test "
    assert len(upstream.received) == 2


async def test_an_upstream_error_is_not_stored(cached: TestServer, upstream: FakeUpstream, http: ClientSession) -> None:
    upstream.script(failing_after(0))
    failed = await post(http, cached, body())
    served = await post(http, cached, body())

    assert failed.status == 502
    assert (served.status, served.cache) == (200, "MISS")
    assert len(upstream.received) == 2


async def test_ten_identical_concurrent_misses_reach_the_upstream_once(
    cached: TestServer, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate()
    upstream.script(gate.answer(upstream))  # answers once all ten wait for the call in flight
    arrived = arrivals(monkeypatch, "fill")
    async with sdk(cached) as client:
        asking = asyncio.gather(*(client.completions.with_raw_response.create(**body()) for _ in range(10)))
        await eventually(lambda: len(arrived) == 10 or asking.done())
        gate.release.set()
        responses = await asking

    assert len(upstream.received) == 1
    assert {r.parse().choices[0].text for r in responses} == {"echo: Say this is a test"}
    assert {r.headers[STATUS] for r in responses} == {"MISS"}
    assert sorted(r.headers["x-gateway-attempts"] for r in responses) == ["0"] * 9 + ["1"]


async def test_identical_concurrent_streams_share_one_call_and_followers_get_it_replayed(
    cached: TestServer, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate()  # the first word, then the rest once all five share the stream
    upstream.script(gate.stream(upstream, ("slow ", "but ", "complete ")))
    arrived = arrivals(monkeypatch, "share_stream")
    async with sdk(cached) as client:
        streaming = asyncio.gather(*(sdk_stream(client) for _ in range(5)))
        await eventually(lambda: len(arrived) == 5 or streaming.done())
        gate.release.set()
        results = await streaming

    assert len(upstream.received) == 1
    assert {text for text, _, _, _ in results} == {"slow but complete "}
    assert {status for _, status, _, _ in results} == {"MISS"}


async def test_followers_of_a_failing_call_each_get_its_error(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = asyncio.Event()
    upstream.script(held_failure(release, status=503))  # fails once all four wait for the call in flight
    arrived = arrivals(monkeypatch, "fill")
    asking = asyncio.gather(*(post(http, cached, body()) for _ in range(4)))
    await eventually(lambda: len(arrived) == 4 or asking.done())
    release.set()
    failed = await asking

    assert [seen.status for seen in failed] == [502] * 4
    assert {seen.json["error"]["code"] for seen in failed} == {failed[0].json["error"]["code"]}
    assert len(upstream.received) == 1


async def test_redis_stopped_mid_test_leaves_the_gateway_answering_from_memory_and_upstream(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    async with own_redis() as redis:
        gateway = await make_gateway(cache_config(upstream, redis_url=redis.url))
        assert (await post(http, gateway, body("before"))).cache == "MISS"
        client = aioredis.from_url(redis.url)
        stored = [key async for key in client.scan_iter(match="gateway:cache:*")]
        await client.aclose()
        await redis.stop()

        with caplog.at_level(logging.WARNING, logger="policies.cache.redis_tier"):
            async with asyncio.timeout(10):  # never waiting on the dead Redis (a hang guard, not a speed target)
                seen = [await post(http, gateway, body(prompt)) for prompt in ("before", "after", "after", "other")]

    assert len(stored) == 1  # the entry did reach Redis while it was up
    assert [s.status for s in seen] == [200] * 4
    assert [s.cache for s in seen] == ["HIT", "MISS", "HIT", "MISS"]  # the memory tier keeps serving
    assert len([r for r in caplog.records if "Redis cache unavailable" in r.message]) == 1  # once per interval


async def test_redis_only_cache_with_redis_stopped_serves_every_request_from_upstream(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    async with own_redis() as redis:
        gateway = await make_gateway(cache_config(upstream, redis_url=redis.url, cache={"memory_max_bytes": 0}))
        assert [(await post(http, gateway, body())).cache for _ in range(2)] == ["MISS", "HIT"]
        await redis.stop()
        after = [await post(http, gateway, body()) for _ in range(3)]

    assert [(s.status, s.cache) for s in after] == [(200, "MISS")] * 3
    assert len(upstream.received) == 4


async def test_a_miss_on_one_instance_is_a_hit_on_another_sharing_redis(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, redis_url: str, redis_prefix: str
) -> None:
    # Redis calls may take their time on a loaded machine (cache_config gives them a second), and A
    # stores its entry after answering: B asks once the entry is in Redis.
    config = cache_config(upstream, redis_url=redis_url, prefix=redis_prefix)
    replica_a, replica_b = await make_gateway(config), await make_gateway(config)
    on_a = await post(http, replica_a, body())
    async with redis_client(redis_url) as redis:
        for _ in range(500):
            if [key async for key in redis.scan_iter(match=f"{redis_prefix}*")]:
                break
            await asyncio.sleep(0.01)
    on_b = await post(http, replica_b, body())
    async with sdk(replica_b) as client:
        streamed_on_b, stream_status, _, _ = await sdk_stream(client)

    assert (on_a.cache, on_b.cache, stream_status) == ("MISS", "HIT", "HIT")
    assert on_b.raw == on_a.raw
    assert streamed_on_b == on_a.text
    assert len(upstream.received) == 1


async def test_entries_outlive_a_config_reload(
    aiohttp_server: AiohttpServer, upstream: FakeUpstream, http: ClientSession, tmp_path: Path
) -> None:
    path = tmp_path / "config.yaml"
    config = cache_config(upstream)
    config["routing"] = {"reload": {"watch": False, "header_min_interval_s": 0}}
    write_config(path, config)
    gateway = await start_gateway_from_file(aiohttp_server, path)
    assert (await post(http, gateway, body())).cache == "MISS"

    config["deployments"][0]["tags"] = ["reloaded"]
    write_config(path, config)
    after_reload = await post(http, gateway, body(), {"x-gateway-refresh-config": "true"})
    config["deployments"][0]["policies"] = []
    write_config(path, config)
    without_policy = await post(http, gateway, body(), {"x-gateway-refresh-config": "true"})

    assert after_reload.cache == "HIT"
    assert without_policy.status == 200
    assert STATUS not in without_policy.headers  # the new config no longer caches this deployment
    assert len(upstream.received) == 2
