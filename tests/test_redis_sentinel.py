"""The gateway on a real master, replica and three Sentinels (`redis.mode: sentinel`), started by the
test: the master is killed; until Sentinel promotes the replica, `limits.on_redis_error` decides
(open: served without limits, closed: 503 `limits_unavailable`) and nothing else fails; once it has,
the gateway follows the promotion and the limits hold again."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory
from tests.fake_upstream import FakeUpstream
from tests.redis_cluster_helpers import SentinelSetup, start_sentinels
from tests.test_limits_exact import ENV, OTHER, TEAM, UNAVAILABLE, codes, config, post

FAILOVER_DEADLINE_S = 60.0  # down-after 1 s and a failover of a few seconds, on a loaded machine


@pytest.fixture
def sentinels() -> Iterator[SentinelSetup]:
    setup = start_sentinels()
    try:
        yield setup
    finally:
        setup.stop()


async def ready(http: ClientSession, gateway: TestServer) -> tuple[int, dict[str, Any]]:
    async with http.get(gateway.make_url("/ready")) as response:
        return response.status, await response.json()


@pytest.mark.parametrize("on_redis_error", ["open", "closed"])
async def test_the_gateway_follows_a_failover_and_on_redis_error_decides_meanwhile(
    sentinels: SentinelSetup,  # first: stopped after the gateway, which may still write to Redis as it stops
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    on_redis_error: str,
) -> None:
    redis: dict[str, Any] = {
        "mode": "sentinel",
        "sentinels": sentinels.addresses,
        "service_name": sentinels.service_name,
    }
    settings = config(
        upstream,
        {**redis, "prefix": f"test:{uuid.uuid4().hex}:"},
        team={"limits": {"rpm": 10_000}},
        other={"limits": {"rpm": 5}},
    )
    settings["limits"] = {"on_redis_error": on_redis_error}
    gateway = await make_gateway(settings, ENV)
    assert (await post(http, gateway, TEAM))[0] == 200
    assert (await ready(http, gateway))[1]["redis"] == "ok"
    old_master = sentinels.master_port()

    sentinels.master.kill()
    answers = [await post(http, gateway, TEAM)]  # Sentinel still names the dead master for 1 s at least
    deadline = time.monotonic() + FAILOVER_DEADLINE_S
    while sentinels.master_port() == old_master or (await ready(http, gateway))[0] != 200:
        assert time.monotonic() < deadline, "no failover"
        answers.append(await post(http, gateway, TEAM))
        await asyncio.sleep(0.05)

    counted = codes(answers)
    if on_redis_error == "open":
        assert counted == {(200, None): len(answers)}  # served without limits meanwhile
    else:
        assert answers[0][:2] == (503, {"error": answers[0][1]["error"]})
        assert answers[0][1]["error"]["code"] == "limits_unavailable"
        assert set(counted) <= {(200, None), UNAVAILABLE}
    # The promoted replica holds the limits now: rpm 5 admits exactly 5 of 10.
    after = await asyncio.gather(*(post(http, gateway, OTHER) for _ in range(10)))
    assert codes(after) == {(200, None): 5, (429, "rate_limit_exceeded"): 5}
    status, body = await ready(http, gateway)
    assert (status, body["redis"]) == (200, "ok")
