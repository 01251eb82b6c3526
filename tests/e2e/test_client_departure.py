"""A client that goes away, with `handler_cancellation` on as `gateway serve` runs it: once the
upstream call is decided, the settlement of limits and budgets, the cache write, the metrics and
the access log always complete. A client that closes right after `[DONE]` leaves a cached answer,
free slots and a 2xx under its deployment; one that leaves mid-answer cancels the upstream call
and is recorded as 499 under its deployment. Real HTTP on loopback (raw sockets that hang up),
real Redis for the limits and the cache."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from gateway.pipeline.flow import Pipeline, PreparedCall
from policies.cache import CacheEntry, CachePlan, ResponseCache
from policies.limits.service import Admission
from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream
from tests.support.observability_helpers import log_lines, scrape, value
from tests.support.stream_helpers import DONE, Gate, hang_up_after

TEAM_KEY = "team-key-departure-0123456789"
AUTH = {"Authorization": f"Bearer {TEAM_KEY}"}
Json = dict[str, Any]


def departure_config(upstream: FakeUpstream, redis: dict[str, str], log: Path, *, cached: bool) -> Json:
    """One deployment, `fake`; one key that may have one request in flight at a time."""
    fake = deployment("fake", upstream.base_url, timeout_s=5, retries=0, policies=["cached"] if cached else [])
    return {
        "redis": redis,
        "keys": [{"name": "team", "key": "${TEAM_KEY}", "limits": {"concurrent": 1}}],
        "deployments": [fake],
        "policies": {"cached": {"cache": {}}},
        "observability": {"access_log": {"path": str(log)}},
    }


@pytest.fixture(params=[True, False], ids=["cached", "uncached"])
def cached(request: pytest.FixtureRequest) -> bool:
    flag: bool = request.param
    return flag


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "access.log"


@pytest.fixture
async def gateway(
    make_gateway: GatewayFactory, upstream: FakeUpstream, redis_settings: dict[str, str], log: Path, cached: bool
) -> TestServer:
    return await make_gateway(departure_config(upstream, redis_settings, log, cached=cached), {"TEAM_KEY": TEAM_KEY})


def body(**fields: Any) -> Json:
    return {"model": "fake", "prompt": "Say this is a test", "max_tokens": 8, "temperature": 0, **fields}


async def post(http: ClientSession, gateway: TestServer, payload: Json) -> tuple[int, dict[str, str], bytes]:
    async with http.post(gateway.make_url("/v1/completions"), json=payload, headers=AUTH) as response:
        return response.status, dict(response.headers), await response.read()


async def requests_counted(http: ClientSession, gateway: TestServer, count: int) -> dict[Any, float]:
    """The scrape once `count` completion requests have been recorded."""
    url = str(gateway.make_url("/metrics"))
    seen: dict[Any, float] = {}

    async def recorded() -> bool:
        nonlocal seen
        seen = await scrape(http, url)
        return value(seen, "gateway_requests_total") >= count

    for _ in range(3000):  # 30 s at least: a bound for a hang, not a speed
        if await recorded():
            return seen
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {count} requests recorded: {seen}")


@pytest.fixture
def slow_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settlement and the cache write take a while, as on a busy Redis: work that came after
    `[DONE]` would be cut by a client that hangs up as soon as it reads it."""
    settle, store = Pipeline.settle, ResponseCache.store

    async def slow_settle(self: Pipeline, admission: Admission, call: PreparedCall) -> None:
        await asyncio.sleep(0.1)
        await settle(self, admission, call)

    async def slow_store(self: ResponseCache, plan: CachePlan, body: bytes) -> CacheEntry | None:
        await asyncio.sleep(0.1)
        return await store(self, plan, body)

    monkeypatch.setattr(Pipeline, "settle", slow_settle)
    monkeypatch.setattr(ResponseCache, "store", slow_store)


@pytest.mark.usefixtures("slow_redis")
async def test_a_client_that_closes_right_after_done_leaves_its_answer_cached_its_slot_free_and_a_2xx(
    gateway: TestServer, upstream: FakeUpstream, http: ClientSession, log: Path, cached: bool
) -> None:
    raw = await hang_up_after(gateway, body(stream=True), AUTH, DONE)
    # At once, with the same key (one request in flight at most) and the same question:
    status, headers, again = await post(http, gateway, body(stream=True))

    assert b"HTTP/1.1 200" in raw
    assert status == 200  # the first request's slot was free: not a 429
    assert again.endswith(DONE + b"\n\n")
    if cached:
        assert headers["x-gateway-cache-status"] == "HIT"  # its answer was stored
        assert len(upstream.received) == 1
    else:
        assert len(upstream.received) == 2
    scraped = await requests_counted(http, gateway, 2)
    assert value(scraped, "gateway_requests_total", deployment="fake", status_class="2xx", stream="true") == 2
    assert value(scraped, "gateway_requests_total", deployment="unrouted") == 0
    first = (await log_lines(log, 2))[0]
    assert (first["status"], first["deployment"], first["key"]) == (200, "fake", "team")


async def test_a_client_that_leaves_mid_stream_cancels_the_upstream_and_is_a_499_under_its_deployment(
    gateway: TestServer, upstream: FakeUpstream, http: ClientSession, log: Path, cached: bool
) -> None:
    gate = Gate()
    upstream.script(gate.stream(upstream))
    await hang_up_after(gateway, body(stream=True), AUTH, b"data: {")  # gone after the first event
    await asyncio.wait_for(upstream.closed_early.wait(), timeout=5)  # the upstream saw the disconnect

    (line,) = await log_lines(log, 1)
    assert (line["status"], line["deployment"], line["provider"], line["attempts"]) == (499, "fake", "openai", 1)
    scraped = await requests_counted(http, gateway, 1)
    assert value(scraped, "gateway_requests_total", deployment="fake", status_class="4xx", stream="true") == 1
    assert value(scraped, "gateway_requests_total", deployment="unrouted") == 0
    status, headers, again = await post(http, gateway, body(stream=True))  # its slot was freed
    assert status == 200
    assert again.endswith(DONE + b"\n\n")
    assert not gate.finished
    if cached:
        assert headers["x-gateway-cache-status"] == "MISS"  # the cut answer was not stored


async def test_a_client_that_leaves_before_a_plain_answer_cancels_the_upstream_and_is_a_499(
    gateway: TestServer, upstream: FakeUpstream, http: ClientSession, log: Path
) -> None:
    gate = Gate()
    upstream.script(gate.answer(upstream))
    await hang_up_after(gateway, body(), AUTH, b"", hold=gate.opened)  # gone while the upstream thinks
    await asyncio.wait_for(upstream.closed_early.wait(), timeout=5)

    (line,) = await log_lines(log, 1)
    assert (line["status"], line["deployment"]) == (499, "fake")
    scraped = await requests_counted(http, gateway, 1)
    assert value(scraped, "gateway_requests_total", deployment="fake", status_class="4xx", stream="false") == 1
    assert (await post(http, gateway, body()))[0] == 200
