"""The gateway on a real three-master Redis Cluster (`redis.mode: cluster`), started by the tests:
limits and budgets exact at 300 concurrent requests across two gateways, a slot moved to another
master while requests run (MOVED, ASK and TRYAGAIN followed: no request fails, the counts stay
exact), and every store (keys, breakers, cache, rate limits over several slots) on the cluster."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import ClientSession, TCPConnector
from redis.asyncio.cluster import RedisCluster

from gateway.keys.records import KeyRecord
from gateway.keys.store import RedisKeyStore
from gateway.routing.breaker import RedisBreakerStore
from gateway.routing.breaker_state import BreakerRecord
from policies.cache import RedisCache, make_entry
from policies.limits.rate import Scope
from policies.limits.rate_redis import RedisRateLimiter
from policies.limits.specs import LimitSpec
from policies.redis_pool import BoundedCluster, RedisTarget, bounded_client
from tests.conftest import GatewayFactory
from tests.policies.limits.test_limits_exact import (
    ENV,
    OTHER,
    PATIENT_TIMEOUT_S,
    TEAM,
    UNAVAILABLE,
    Gate,
    assert_charged_exactly,
    assert_exactly_the_bucket,
    codes,
    config,
    post,
    usage,
)
from tests.support.cache_samples import completion, raw
from tests.support.fake_upstream import FakeUpstream
from tests.support.redis_cluster_helpers import Cluster, command, migrate_slot, redis_cluster

__all__ = ["redis_cluster"]  # a fixture: the session's cluster

CONCURRENCY = 300


@pytest.fixture
def cluster_settings(redis_cluster: Cluster) -> dict[str, Any]:
    """A config's `redis:` block: the cluster (any node's URL), under this test's own prefix, with
    test_limits_exact's patient timeout (exactness, not the clock, is tested here)."""
    prefix = f"test:{uuid.uuid4().hex}:"
    return {"mode": "cluster", "url": redis_cluster.url, "prefix": prefix, "timeout_s": PATIENT_TIMEOUT_S}


@pytest.fixture
async def many() -> AsyncIterator[ClientSession]:
    async with ClientSession(connector=TCPConnector(limit=0)) as session:
        yield session


@pytest.fixture
async def cluster_client(redis_cluster: Cluster) -> AsyncIterator[RedisCluster]:
    target = RedisTarget(url=redis_cluster.url, mode="cluster")
    client = bounded_client(target, socket_timeout=5, socket_connect_timeout=5)
    assert isinstance(client, BoundedCluster)
    try:
        yield client
    finally:
        await client.aclose()


def slot_of(cluster: Cluster, key: str) -> int:
    return int(command(cluster.nodes[0].client(), "CLUSTER KEYSLOT", key))


async def test_300_concurrent_requests_across_two_gateways_on_a_cluster_admit_exactly_the_rpm(
    make_gateway: GatewayFactory, upstream: FakeUpstream, many: ClientSession, cluster_settings: dict[str, Any]
) -> None:
    """The key's bucket (rpm 50) and the deployment's (rpm 200) lie in different slots: each
    request takes from one, then the other, and a refusal takes nothing from either."""
    settings = config(upstream, cluster_settings, team={"limits": {"rpm": 50}}, limits={"rpm": 200})
    one, two = await make_gateway(settings, ENV), await make_gateway(settings, ENV)
    started = time.monotonic()
    answers = await asyncio.gather(*(post(many, (one, two)[i % 2], TEAM) for i in range(CONCURRENCY)))

    assert_exactly_the_bucket(answers, 50, time.monotonic() - started)
    admitted = codes(answers).get((200, None), 0)
    assert len(upstream.received) == admitted
    # The deployment's bucket gave back what the key's refusals did not use: another key's 150 more fit.
    status, _, headers = await post(many, one, OTHER)
    assert status == 200
    assert int(headers["x-ratelimit-remaining-requests"]) >= 200 - admitted - 1 - 5  # a few refilled meanwhile


async def test_a_token_budget_across_two_gateways_on_a_cluster_admits_what_fits_and_never_more(
    make_gateway: GatewayFactory, upstream: FakeUpstream, many: ClientSession, cluster_settings: dict[str, Any]
) -> None:
    budget = 1234  # 123 requests of 10 tokens fit
    gate = Gate(budget // 10, 2, 8)
    upstream.script(*gate.behaviours())
    settings = config(upstream, cluster_settings, team={"budget": {"tokens": budget, "period": "1d"}})
    one, two = await make_gateway(settings, ENV), await make_gateway(settings, ENV)
    answers = await asyncio.gather(*(post(many, (one, two)[i % 2], TEAM) for i in range(CONCURRENCY)))

    counted = codes(answers)
    assert set(counted) <= {(200, None), (429, "budget_exceeded"), UNAVAILABLE}
    admitted = counted.get((200, None), 0)
    assert admitted == 123 or (admitted < 123 and UNAVAILABLE in counted), counted
    spent = await usage(many, two)
    assert spent["tokens"] <= budget
    assert_charged_exactly(spent, admitted, one, two)


async def test_a_slot_moved_to_another_master_while_requests_run_fails_no_request_and_keeps_the_budget_exact(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    many: ClientSession,
    redis_cluster: Cluster,
    cluster_settings: dict[str, Any],
) -> None:
    """The budget's slot migrates key by key while both gateways reserve and settle in it: they
    meet ASK and TRYAGAIN during the move and MOVED after it, and follow each."""
    fits = 150
    gate = Gate(1, 2, 8)  # open at once: each answer reports 10 tokens, its estimate
    upstream.script(*gate.behaviours(CONCURRENCY))
    team = {"budget": {"tokens": fits * 10 + 4, "period": "1d"}, "limits": {"rpm": 10_000}}
    settings = config(upstream, cluster_settings, team=team)
    one, two = await make_gateway(settings, ENV), await make_gateway(settings, ENV)
    slot = slot_of(redis_cluster, "{team}")  # the budget's hash tag (`{prefix}budget:{team}:…`)
    owner = redis_cluster.owner(slot)
    answers: list[tuple[int, dict[str, Any], dict[str, str]]] = []
    moving, moved = asyncio.Event(), asyncio.Event()
    in_flight = asyncio.Semaphore(20)

    async def send(i: int) -> None:
        async with in_flight:
            answers.append(await post(many, (one, two)[i % 2], TEAM))
        if len(answers) == 60:
            moving.set()

    async def move() -> tuple[int, int]:
        await moving.wait()
        at_start = len(answers)
        await asyncio.to_thread(migrate_slot, redis_cluster, slot, 0.05)
        moved.set()
        return at_start, len(answers)

    mover = asyncio.create_task(move())
    await asyncio.gather(*(send(i) for i in range(CONCURRENCY)))
    at_start, at_end = await asyncio.wait_for(mover, 60)

    assert redis_cluster.owner(slot).port != owner.port  # the slot did move
    assert 60 <= at_start < CONCURRENCY  # it started while requests were being answered
    assert at_end < CONCURRENCY  # and ended before the last of them
    assert codes(answers) == {(200, None): fits, (429, "budget_exceeded"): CONCURRENCY - fits}
    spent = await usage(many, one)
    assert (spent["tokens"], spent["reserved_tokens"]) == (10 * fits, 0)


async def test_key_records_breakers_and_cache_entries_work_on_the_cluster(
    cluster_client: RedisCluster, redis_cluster: Cluster
) -> None:
    prefix = f"test:{uuid.uuid4().hex}:"
    keys = RedisKeyStore(cluster_client, prefix, cache_ttl_s=0)
    record = KeyRecord(name="team", sha256="a" * 64)
    assert await keys.create(record)  # a WATCH/MULTI transaction over the names and the record
    assert not await keys.create(record)
    rotated = await keys.update("team", lambda old: old.model_copy(update={"sha256": "b" * 64}))
    assert rotated is not None
    assert [found.sha256 for found in await keys.list()] == ["b" * 64]
    assert await keys.lookup("a" * 64) is None
    assert slot_of(redis_cluster, f"{prefix}{{keys}}:names") == slot_of(redis_cluster, f"{prefix}{{keys}}:hash:x")

    breakers = RedisBreakerStore(cluster_client, f"{prefix}breaker:", 60)
    await breakers.update("fake", lambda old: (BreakerRecord(consecutive_failures=3), None))
    assert (await breakers.read("fake")).consecutive_failures == 3

    cache = RedisCache(cluster_client, prefix=f"{prefix}cache:", timeout_s=5)
    entry = make_entry(raw(completion("Hello there.")), now=time.time(), ttl_s=60)
    for i in range(30):
        assert await cache.put(f"entry-{i}", entry)
    assert all([await cache.get(f"entry-{i}") for i in range(30)])
    holders = {redis_cluster.owner(slot_of(redis_cluster, f"{prefix}cache:entry-{i}")).port for i in range(30)}
    assert len(holders) > 1  # the entries spread over the masters


async def test_a_request_one_scope_refuses_gives_back_what_the_other_scopes_slot_took(
    cluster_client: RedisCluster, redis_cluster: Cluster
) -> None:
    prefix = f"test:{uuid.uuid4().hex}:"
    rate = RedisRateLimiter(cluster_client, prefix=prefix)
    key = Scope("key", "team", LimitSpec(rpm=5, tpm=1000, concurrent=5))
    deployment = Scope("deployment", "fake", LimitSpec(rpm=1))
    assert slot_of(redis_cluster, f"{prefix}rate:{{key:team}}") != slot_of(
        redis_cluster, f"{prefix}rate:{{deployment:fake}}"
    )

    assert (await rate.acquire([key, deployment], 100, "lease-1")).refusal is None
    refused = await rate.acquire([key, deployment], 100, "lease-2")
    assert refused.refusal is not None
    assert (refused.refusal.scope, refused.refusal.dimension) == ("deployment", "requests")

    bucket = await cluster_client.hgetall(f"{prefix}rate:{{key:team}}")
    assert float(bucket[b"r"]) >= 4  # one request taken, the refused one given back
    assert float(bucket[b"t"]) >= 900
    assert await cluster_client.zrange(f"{prefix}rate:{{key:team}}:leases", 0, -1) == [b"lease-1"]
    await rate.finish([key, deployment], "lease-1", 0, 100)
    assert await cluster_client.zcard(f"{prefix}rate:{{key:team}}:leases") == 0
