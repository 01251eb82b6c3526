"""Retries: which failures are retried, how many times, how long the gateway waits between them
(recorded by an injected sleep instead of waited), Retry-After, and the deadline of a request."""

from __future__ import annotations

import asyncio
import random
import socket
from email.utils import formatdate
from typing import Any

import openai
import pytest
from aiohttp import ClientSession
from pytest_aiohttp import AiohttpServer

from gateway.config.routing import BackoffConfig
from gateway.routing.retries import backoff_s
from tests.conftest import deployment
from tests.support import fake_upstream as fake
from tests.support.fake_clock import FakeClock
from tests.support.fake_upstream import Behaviour, FakeUpstream
from tests.support.routing_helpers import (
    RecordingSleep,
    Upstreams,
    completion,
    events,
    make_timing,
    post,
    sdk,
    start_gateway,
)


@pytest.fixture
def upstreams(aiohttp_server: AiohttpServer) -> Upstreams:
    return Upstreams(aiohttp_server)


@pytest.fixture
async def up(upstreams: Upstreams) -> FakeUpstream:
    return await upstreams.start("a")


def single(base_url: str, routing: dict[str, Any] | None = None, **settings: Any) -> dict[str, Any]:
    return {"deployments": [deployment("a", base_url, **{"timeout_s": 30, **settings})], "routing": routing or {}}


def failing(behaviour: Behaviour, times: int) -> list[Behaviour]:
    return [behaviour] * times


# Each with the deployment's timeout_s: a timeout needs a short one (which the retry's answer must
# still meet: 2 s, room for a loaded machine), every other failure a long one (a slow answer past a
# short timeout would be a second failure, and a third attempt).
RETRYABLE = [
    pytest.param(fake.drop_connection(), 30, id="connection-dropped"),
    pytest.param(fake.stall(120.0), 2, id="timeout"),
    pytest.param(fake.status(408), 30, id="408"),
    pytest.param(fake.status(429), 30, id="429"),
    pytest.param(fake.status(500), 30, id="500"),
    pytest.param(fake.status(502), 30, id="502"),
    pytest.param(fake.status(503), 30, id="503"),
    pytest.param(fake.status(504), 30, id="504"),
]


@pytest.mark.parametrize(("failure", "timeout_s"), RETRYABLE)
async def test_a_retryable_failure_is_retried_and_the_sdk_gets_the_answer(
    aiohttp_server: AiohttpServer, up: FakeUpstream, failure: Behaviour, timeout_s: float
) -> None:
    sleep = RecordingSleep()
    gateway = await start_gateway(
        aiohttp_server, single(up.base_url, timeout_s=timeout_s, retries=2), timing=make_timing(sleep)
    )
    up.script(failure)

    async with sdk(gateway) as client:  # max_retries=0: any retry is the gateway's
        raw = await client.completions.with_raw_response.create(model="a", prompt="again")

    assert raw.parse().choices[0].text == "echo: again"
    assert raw.headers["x-gateway-attempts"] == "2"
    assert raw.headers["x-gateway-deployment"] == "a"
    assert len(up.received) == 2
    assert len(sleep.delays) == 1
    assert events(gateway).retries["a"] == 1


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
async def test_other_4xx_are_never_retried(
    http: ClientSession, aiohttp_server: AiohttpServer, up: FakeUpstream, code: int
) -> None:
    sleep = RecordingSleep()
    gateway = await start_gateway(aiohttp_server, single(up.base_url, retries=3), timing=make_timing(sleep))
    up.script(fake.status(code, {"message": f"upstream says {code}", "type": "invalid_request_error"}))

    status, body, headers = await post(http, gateway, completion("a"))

    assert status == code
    assert body["error"]["message"] == f"upstream says {code}"
    assert headers["x-gateway-attempts"] == "1"
    assert len(up.received) == 1
    assert sleep.delays == []
    assert events(gateway).retries["a"] == 0


@pytest.mark.parametrize(
    ("deployment_retries", "routing", "calls"),
    [
        pytest.param(3, {}, 4, id="deployment-retries"),
        pytest.param(None, {"retries": 1}, 2, id="routing-default"),
        pytest.param(0, {"retries": 4}, 1, id="deployment-overrides-routing"),
        pytest.param(None, {}, 3, id="built-in-default"),
        pytest.param(6, {"max_attempts": 3}, 3, id="max-attempts-caps"),
    ],
)
async def test_attempts_are_one_plus_retries_capped_by_max_attempts(
    http: ClientSession,
    aiohttp_server: AiohttpServer,
    up: FakeUpstream,
    deployment_retries: int | None,
    routing: dict[str, Any],
    calls: int,
) -> None:
    sleep = RecordingSleep()
    settings = {} if deployment_retries is None else {"retries": deployment_retries}
    gateway = await start_gateway(aiohttp_server, single(up.base_url, routing, **settings), timing=make_timing(sleep))
    up.script(*failing(fake.status(500), 10))

    status, body, headers = await post(http, gateway, completion("a"))

    assert status == 502
    assert "HTTP 500" in body["error"]["message"]
    assert headers["x-gateway-attempts"] == str(calls)
    assert len(up.received) == calls
    assert len(sleep.delays) == calls - 1


async def test_backoff_delays_stay_within_the_exponential_ceiling(
    http: ClientSession, aiohttp_server: AiohttpServer, up: FakeUpstream
) -> None:
    sleep = RecordingSleep()
    backoff = {"initial_s": 0.1, "multiplier": 3, "max_s": 0.5}
    routing = {"backoff": backoff, "max_attempts": 5, "breaker": {"enabled": False}}  # 25 failures in a row
    config = single(up.base_url, routing, retries=4)
    gateway = await start_gateway(aiohttp_server, config, timing=make_timing(sleep))
    up.script(*failing(fake.status(503), 25))

    for _ in range(5):
        status, _, headers = await post(http, gateway, completion("a"))
        assert status == 502
        assert headers["x-gateway-attempts"] == "5"

    ceilings = [min(0.5, 0.1 * 3 ** (k - 1)) for k in range(1, 5)]  # 0.1, 0.3, 0.5, 0.5
    assert len(sleep.delays) == 20
    for index, delay in enumerate(sleep.delays):
        assert 0 <= delay <= ceilings[index % 4], (index, delay)
    assert len(set(sleep.delays)) > 1  # jittered, not a fixed wait


@pytest.mark.parametrize("failures", [1, 2, 3, 6])
def test_backoff_is_full_jitter_up_to_the_ceiling(failures: int) -> None:
    config = BackoffConfig(initial_s=0.2, multiplier=2, max_s=1.0)
    ceiling = min(1.0, 0.2 * 2 ** (failures - 1))
    rng = random.Random(failures)  # noqa: S311

    draws = [backoff_s(config, failures, rng) for _ in range(2000)]

    assert all(0 <= draw <= ceiling for draw in draws)
    assert max(draws) > 0.95 * ceiling
    assert min(draws) < 0.05 * ceiling
    assert abs(sum(draws) / len(draws) - ceiling / 2) < 0.05 * ceiling


@pytest.mark.parametrize("code", [429, 503])
@pytest.mark.parametrize(
    ("header", "value", "least"),
    [("Retry-After", "3", 3.0), ("retry-after-ms", "1500", 1.5), ("Retry-After", "0.75", 0.75)],
)
async def test_retry_after_is_honoured(
    http: ClientSession,
    aiohttp_server: AiohttpServer,
    up: FakeUpstream,
    code: int,
    header: str,
    value: str,
    least: float,
) -> None:
    sleep = RecordingSleep()
    gateway = await start_gateway(aiohttp_server, single(up.base_url, retries=1), timing=make_timing(sleep))
    up.script(fake.status(code, headers={header: value}))

    status, _, headers = await post(http, gateway, completion("a"))

    assert status == 200
    assert headers["x-gateway-attempts"] == "2"
    assert len(sleep.delays) == 1
    assert sleep.delays[0] >= least


async def test_retry_after_as_an_http_date_is_honoured(
    http: ClientSession, aiohttp_server: AiohttpServer, up: FakeUpstream
) -> None:
    sleep = RecordingSleep()
    wall = FakeClock(1_700_000_000.0)
    gateway = await start_gateway(aiohttp_server, single(up.base_url, retries=1), timing=make_timing(sleep, wall=wall))
    up.script(fake.status(503, headers={"Retry-After": formatdate(1_700_000_004, usegmt=True)}))

    status, _, _ = await post(http, gateway, completion("a"))

    assert status == 200
    assert sleep.delays == [pytest.approx(4.0)]


async def test_a_retry_after_above_the_cap_is_not_waited_for(
    http: ClientSession, aiohttp_server: AiohttpServer, up: FakeUpstream
) -> None:
    sleep = RecordingSleep()
    config = single(up.base_url, {"backoff": {"retry_after_max_s": 5}}, retries=3)
    gateway = await start_gateway(aiohttp_server, config, timing=make_timing(sleep))
    up.script(fake.status(429, headers={"Retry-After": "30"}))

    status, _, headers = await post(http, gateway, completion("a"))

    assert status == 429
    assert headers["Retry-After"] == "30"  # the client learns when to come back
    assert headers["x-gateway-attempts"] == "1"
    assert len(up.received) == 1
    assert sleep.delays == []


async def test_a_retry_after_above_the_cap_moves_on_to_the_fallback(
    http: ClientSession, aiohttp_server: AiohttpServer, upstreams: Upstreams
) -> None:
    a, b = await upstreams.start_many("a", "b")
    sleep = RecordingSleep()
    config = {
        "deployments": [
            deployment("a", a.base_url, retries=3, fallbacks=["b"]),
            deployment("b", b.base_url),
        ],
        "routing": {"backoff": {"retry_after_max_s": 5}},
    }
    gateway = await start_gateway(aiohttp_server, config, timing=make_timing(sleep))
    a.script(fake.status(429, headers={"retry-after-ms": "60000"}))

    status, _, headers = await post(http, gateway, completion("a"))

    assert status == 200
    assert headers["x-gateway-deployment"] == "b"
    assert headers["x-gateway-attempts"] == "2"
    assert upstreams.calls == ["a", "b"]
    assert sleep.delays == []


async def test_the_deadline_bounds_a_stalled_request(
    http: ClientSession, aiohttp_server: AiohttpServer, up: FakeUpstream
) -> None:
    config = single(up.base_url, {"deadline_s": 0.4}, timeout_s=60, retries=3)
    gateway = await start_gateway(aiohttp_server, config)  # the real clock
    up.script(*failing(fake.stall(120.0), 4))  # past the timeout too: only the deadline ends the wait

    # The 0.4 s deadline, not the 60 s timeout nor 4 x 60 s of retries: 10 s leaves a loaded machine room.
    async with asyncio.timeout(10):
        status, body, headers = await post(http, gateway, completion("a"))

    assert status == 504
    assert body["error"]["code"] == "upstream_timeout"
    assert headers["x-gateway-attempts"] == "1"
    assert len(up.received) == 1


async def test_the_deadline_bounds_retries_and_their_waits(
    http: ClientSession, aiohttp_server: AiohttpServer, up: FakeUpstream
) -> None:
    clock = FakeClock()
    sleep = RecordingSleep(clock)  # each wait moves the gateway's clock on
    config = single(up.base_url, {"deadline_s": 3.5, "max_attempts": 20}, retries=10)
    gateway = await start_gateway(aiohttp_server, config, timing=make_timing(sleep, clock=clock))
    up.script(*failing(fake.status(503, headers={"Retry-After": "1"}), 20))

    status, _, headers = await post(http, gateway, completion("a"))

    # Calls at t = 0, 1, 2, 3; a fourth wait would end past the 3.5 s deadline.
    assert status == 502
    assert sleep.delays == [1.0, 1.0, 1.0]
    assert headers["x-gateway-attempts"] == "4"
    assert len(up.received) == 4


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_an_unreachable_upstream_is_retried_then_reported(
    http: ClientSession, aiohttp_server: AiohttpServer
) -> None:
    sleep = RecordingSleep()
    config = single(f"http://127.0.0.1:{closed_port()}/v1", retries=2)
    gateway = await start_gateway(aiohttp_server, config, timing=make_timing(sleep))

    status, body, headers = await post(http, gateway, completion("a"))

    assert status == 502
    assert body["error"]["code"] == "upstream_unreachable"
    assert headers["x-gateway-attempts"] == "3"
    assert len(sleep.delays) == 2


async def test_a_stream_is_retried_before_its_first_event(aiohttp_server: AiohttpServer, up: FakeUpstream) -> None:
    gateway = await start_gateway(aiohttp_server, single(up.base_url, retries=2))
    up.script(fake.status(502), fake.stream_then_drop([]))

    async with sdk(gateway) as client:
        raw = await client.completions.with_raw_response.create(model="a", prompt="one two", stream=True)
        text = "".join([chunk.choices[0].text async for chunk in raw.parse() if chunk.choices])

    assert text == "echo: one two "
    assert raw.headers["x-gateway-attempts"] == "3"
    assert len(up.received) == 3


async def test_the_sdk_without_retries_gets_an_error_when_every_attempt_failed(
    aiohttp_server: AiohttpServer, up: FakeUpstream
) -> None:
    gateway = await start_gateway(aiohttp_server, single(up.base_url, retries=1))
    up.script(*failing(fake.status(503), 2))

    async with sdk(gateway) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.completions.create(model="a", prompt="x")

    assert caught.value.status_code == 502
    assert caught.value.response.headers["x-gateway-attempts"] == "2"
