"""`redis.timeout_s` bounds each Redis call of the request path. Against a real Redis made slow (its
scripts held for 0.4 s by `CLIENT PAUSE WRITE` from a second connection), the default 0.25 s gives up
and `limits.on_redis_error` decides (closed: 503, open: served without limits), while `timeout_s: 2`
waits for Redis and the request is admitted with its limits counted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis.asyncio as aioredis
from aiohttp import ClientSession

from gateway.http.app_keys import SERVING
from tests.conftest import GatewayFactory
from tests.policies.limits.test_limits_exact import ENV, TEAM, config, post
from tests.support.fake_upstream import FakeUpstream
from tests.support.redis_cluster_helpers import RedisProcess, free_ports, start_server

T = TypeVar("T")
SLOW_S = 0.4  # how long Redis holds the request's scripts, when the gateway waits for them
GIVE_UP_WITHIN_S = 10.0  # a bound for a gateway that should give up after 0.25 s, not a speed
PAUSE_GUARD_MS = 10_000  # the pause ends by itself even if a failing test never lifts it
RPM = 100


@pytest.fixture
def slow_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    """A Redis of this test's own: pausing the shared one would stall every other test using it."""
    server = start_server(tmp_path, free_ports(1)[0])
    try:
        yield server
    finally:
        server.stop()


async def while_redis_is_slow(server: RedisProcess, request: Awaitable[T], hold_s: float) -> T:
    """`request`'s outcome while Redis holds every script (WRITE pauses them, and lets this
    connection's own UNPAUSE through) until `hold_s` after it holds the request's first one, or
    until the request is answered. Counted from there, not from the request's sending: on a loaded
    machine the gateway took so long to reach Redis that its own 0.25 s were not yet over when a
    fixed pause ended."""
    control = aioredis.Redis(host="127.0.0.1", port=server.port)
    try:
        await control.client_pause(PAUSE_GUARD_MS, all=False)  # WRITE
        answer = asyncio.ensure_future(request)
        try:
            async with asyncio.timeout(PAUSE_GUARD_MS / 1000):  # a bound for a hang, not a speed
                while not answer.done() and not (await control.info("clients"))["blocked_clients"]:  # noqa: ASYNC110
                    await asyncio.sleep(0.005)  # until Redis holds the script (a paused client is blocked)
            await asyncio.wait({answer}, timeout=hold_s)
        finally:
            await control.client_unpause()
        return await answer
    finally:
        await control.aclose()


@pytest.mark.parametrize(
    ("timeout_s", "on_redis_error", "expected"),
    [
        pytest.param(None, "closed", (503, "limits_unavailable"), id="default-timeout-closed"),
        pytest.param(None, "open", (200, None), id="default-timeout-open"),
        pytest.param(2, "closed", (200, None), id="timeout-2s"),
    ],
)
async def test_redis_timeout_s_decides_whether_a_slow_redis_is_waited_for(
    slow_redis: RedisProcess,  # first: stopped after the gateway
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    timeout_s: float | None,
    on_redis_error: str,
    expected: tuple[int, str | None],
) -> None:
    redis: dict[str, Any] = {"url": slow_redis.url, "prefix": "test:timeout:"}
    if timeout_s is not None:
        redis["timeout_s"] = timeout_s
    settings = config(upstream, redis, team={"limits": {"rpm": RPM}})
    settings["limits"] = {"on_redis_error": on_redis_error}
    gateway = await make_gateway(settings, ENV)
    started = time.monotonic()
    assert (await post(http, gateway, TEAM))[0] == 200  # Redis answering: a pooled connection, scripts loaded

    # Giving up, the gateway answers while Redis still holds its call (however long that takes it);
    # waiting, it is answered once Redis goes on, SLOW_S later: past the default 0.25 s, within its 2 s.
    hold_s = SLOW_S if timeout_s is not None else GIVE_UP_WITHIN_S
    status, body, headers = await while_redis_is_slow(slow_redis, post(http, gateway, TEAM), hold_s)
    took_s = time.monotonic() - started

    assert (status, body["error"]["code"] if status != 200 else None) == expected
    limits = gateway.app[SERVING].shared.limits
    if timeout_s is None:  # gave up on Redis: counted as its failure; served (open) without limit figures
        assert limits.failures.errors >= 1
        assert "x-ratelimit-remaining-requests" not in headers
    else:  # waited: admitted normally, the second request of the minute (plus what refilled meanwhile)
        assert limits.failures.errors == 0
        remaining = int(headers["x-ratelimit-remaining-requests"])
        assert RPM - 2 <= remaining <= RPM - 2 + int(took_s * RPM / 60), (remaining, took_s)
