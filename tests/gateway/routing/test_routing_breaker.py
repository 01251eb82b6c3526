"""Circuit breakers: open after failures, skip the deployment, probe it half-open after a cooldown,
share the state through Redis, and keep answering while one of two upstreams is down."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from gateway.config.routing import BreakerConfig
from gateway.routing.breaker import CircuitBreakers, LocalBreakerStore
from gateway.routing.breaker_state import BreakerRecord, Circuit, Transition, claim_probe, record_outcomes
from tests.conftest import deployment
from tests.support import fake_upstream as fake
from tests.support.fake_clock import FakeClock
from tests.support.fake_upstream import FakeUpstream
from tests.support.routing_helpers import (
    Upstreams,
    completion,
    events,
    eventually,
    make_timing,
    post,
    sdk,
    serving,
    start_gateway,
)
from tests.support.stream_helpers import Gate

COOLDOWN_S = 10.0


@pytest.fixture
def upstreams(aiohttp_server: AiohttpServer) -> Upstreams:
    return Upstreams(aiohttp_server)


@pytest.fixture
async def pair(upstreams: Upstreams) -> tuple[FakeUpstream, FakeUpstream]:
    a, b = await upstreams.start_many("a", "b")
    return a, b


def pair_config(
    pair: tuple[FakeUpstream, FakeUpstream], breaker: dict[str, Any], strategy: str = "priority", **extra: Any
) -> dict[str, Any]:
    """The group `g`: a (tried first while its circuit is closed), then b; no retries."""
    a, b = pair
    return {
        "deployments": [
            deployment("a", a.base_url, aliases=["g"], priority=0, retries=0, timeout_s=30),
            deployment("b", b.base_url, aliases=["g"], priority=1, retries=0, timeout_s=30),
        ],
        "routing": {"strategy": strategy, "breaker": {"cooldown_s": COOLDOWN_S, **breaker}},
        **extra,
    }


async def ask(http: ClientSession, gateway: TestServer, headers: dict[str, str] | None = None) -> tuple[str, str]:
    """(deployment that answered, attempts) of a request that must succeed."""
    status, body, response_headers = await post(http, gateway, completion("g"), headers)
    assert status == 200, body
    return response_headers["x-gateway-deployment"], response_headers["x-gateway-attempts"]


async def test_consecutive_failures_open_the_circuit_and_the_other_member_serves(
    http: ClientSession, aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, _ = pair
    gateway = await start_gateway(aiohttp_server, pair_config(pair, {"consecutive_failures": 3}))
    a.script(*[fake.status(500)] * 20)

    while_closed = [await ask(http, gateway) for _ in range(3)]
    calls_when_opened = len(a.received)
    once_open = [await ask(http, gateway) for _ in range(5)]

    assert while_closed == [("b", "2")] * 3  # a tried and failed, b answered
    assert calls_when_opened == 3
    assert once_open == [("b", "1")] * 5  # a skipped: no wasted attempt
    assert len(a.received) == 3
    assert events(gateway).breaker_transitions == {("a", "open"): 1}


async def test_a_success_resets_the_consecutive_count(
    http: ClientSession, aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, _ = pair
    gateway = await start_gateway(aiohttp_server, pair_config(pair, {"consecutive_failures": 3}))
    a.script(fake.status(500), fake.status(500), fake.answer(), fake.status(500), fake.status(500), fake.answer())

    served = [await ask(http, gateway) for _ in range(6)]

    assert [name for name, _ in served] == ["b", "b", "a", "b", "b", "a"]
    assert len(a.received) == 6
    assert events(gateway).breaker_transitions == {}


async def test_failure_ratio_over_the_window_opens_once_min_requests_are_seen(
    http: ClientSession, aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, _ = pair
    breaker = {"consecutive_failures": 100, "failure_ratio": 0.5, "min_requests": 4, "window_s": 60}
    gateway = await start_gateway(aiohttp_server, pair_config(pair, breaker))
    a.script(fake.status(500), fake.answer(), fake.status(500), fake.status(500), *[fake.status(500)] * 5)

    first_three = [await ask(http, gateway) for _ in range(3)]
    calls_after_three = len(a.received)  # 2 of 3 failed, but fewer than min_requests
    fourth = await ask(http, gateway)  # 3 of 4 failed: opens
    later = [await ask(http, gateway) for _ in range(3)]

    assert [name for name, _ in first_three] == ["b", "a", "b"]
    assert calls_after_three == 3
    assert fourth == ("b", "2")
    assert later == [("b", "1")] * 3
    assert len(a.received) == 4


async def test_failures_outside_the_window_do_not_count(
    http: ClientSession, aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, _ = pair
    wall = FakeClock()
    breaker = {"consecutive_failures": 100, "failure_ratio": 0.5, "min_requests": 3, "window_s": 60}
    gateway = await start_gateway(aiohttp_server, pair_config(pair, breaker), timing=make_timing(wall=wall))
    a.script(fake.status(500), fake.status(500), fake.answer(), fake.answer(), fake.status(500))

    for _ in range(2):
        await ask(http, gateway)  # 2 failures of 2: fewer than min_requests
    wall.advance(61)  # a new window: those two failures are forgotten
    for _ in range(3):
        await ask(http, gateway)  # ok, ok, fail: 1 of 3 here, but 3 of 5 had the old ones counted
    served = await ask(http, gateway)

    assert served == ("a", "1")
    assert len(a.received) == 6
    assert events(gateway).breaker_transitions == {}


async def opened(http: ClientSession, gateway: TestServer, a: FakeUpstream, failures: int = 3) -> None:
    a.script(*[fake.status(500)] * failures)
    for _ in range(failures):
        await ask(http, gateway)
    assert await ask(http, gateway) == ("b", "1")  # open: a is skipped


async def test_after_the_cooldown_a_probe_that_succeeds_closes_the_circuit(
    http: ClientSession, aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, _ = pair
    wall = FakeClock()
    gateway = await start_gateway(
        aiohttp_server, pair_config(pair, {"consecutive_failures": 3}), timing=make_timing(wall=wall)
    )
    await opened(http, gateway, a)

    wall.advance(COOLDOWN_S - 0.5)
    still_open = await ask(http, gateway)
    wall.advance(0.5)
    probe = await ask(http, gateway)
    after = [await ask(http, gateway) for _ in range(3)]

    assert still_open == ("b", "1")
    assert probe == ("a", "1")
    assert after == [("a", "1")] * 3
    assert len(a.received) == 3 + 1 + 3
    assert events(gateway).breaker_transitions == {("a", "open"): 1, ("a", "half_open"): 1, ("a", "closed"): 1}


async def test_a_probe_that_fails_opens_the_circuit_again(
    http: ClientSession, aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, _ = pair
    wall = FakeClock()
    gateway = await start_gateway(
        aiohttp_server, pair_config(pair, {"consecutive_failures": 3}), timing=make_timing(wall=wall)
    )
    await opened(http, gateway, a)

    wall.advance(COOLDOWN_S)
    a.script(fake.status(503))
    probe = await ask(http, gateway)
    calls_after_probe = len(a.received)
    reopened = [await ask(http, gateway) for _ in range(3)]
    wall.advance(COOLDOWN_S - 0.1)  # a fresh cooldown started with the failed probe
    still_open = await ask(http, gateway)

    assert probe == ("b", "2")
    assert calls_after_probe == 4
    assert reopened == [("b", "1")] * 3
    assert still_open == ("b", "1")
    assert len(a.received) == 4
    assert events(gateway).breaker_transitions == {("a", "open"): 2, ("a", "half_open"): 1}


async def test_half_open_lets_a_single_probe_through(
    http: ClientSession, aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, b = pair
    wall = FakeClock()
    gateway = await start_gateway(
        aiohttp_server, pair_config(pair, {"consecutive_failures": 3}), timing=make_timing(wall=wall)
    )
    await opened(http, gateway, a)
    wall.advance(COOLDOWN_S)
    probe = Gate()  # the probe is held until the other requests are answered, whatever they take
    a.script(probe.answer(a))
    before = len(a.received) + len(b.received)

    asking = asyncio.gather(*[ask(http, gateway) for _ in range(5)])
    await eventually(lambda: len(a.received) + len(b.received) == before + 5 or asking.done())
    probe.release.set()
    results = await asking

    assert sorted(results) == [("a", "1")] + [("b", "1")] * 4
    assert len(a.received) == 3 + 1
    assert await ask(http, gateway) == ("a", "1")  # the probe succeeded: closed


@pytest.mark.parametrize("first_to_open", ["a", "b"])
async def test_when_every_candidate_is_open_the_one_opened_longest_ago_is_tried(
    http: ClientSession, aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream], first_to_open: str
) -> None:
    upstream = dict(zip("ab", pair, strict=True))
    second_to_open = "b" if first_to_open == "a" else "a"
    wall = FakeClock()
    breaker = {"consecutive_failures": 2, "cooldown_s": 60}
    gateway = await start_gateway(aiohttp_server, pair_config(pair, breaker), timing=make_timing(wall=wall))
    for name in (first_to_open, second_to_open):
        upstream[name].script(fake.status(500), fake.status(500))
        for _ in range(2):
            status, _, _ = await post(http, gateway, completion("g"), {"x-gateway-deployment": name})
            assert status == 502
        wall.advance(5)
    calls = {name: len(u.received) for name, u in upstream.items()}

    served = await ask(http, gateway)  # both upstreams have recovered meanwhile

    assert served == (first_to_open, "1")
    assert len(upstream[first_to_open].received) == calls[first_to_open] + 1
    assert len(upstream[second_to_open].received) == calls[second_to_open]
    transitions = events(gateway).breaker_transitions
    assert (transitions["a", "open"], transitions["b", "open"]) == (1, 1)


async def test_with_one_of_two_upstreams_down_every_request_is_answered(
    aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, _ = pair
    config = pair_config(pair, {"consecutive_failures": 2}, strategy="weighted")
    config["deployments"][0]["timeout_s"] = 0.3
    # The breaker's clock stands still: its cooldown cannot end while a loaded machine serves the 20.
    gateway = await start_gateway(aiohttp_server, config, timing=make_timing(wall=FakeClock()))
    a.script(*[fake.stall(120.0)] * 30)  # down: it accepts the connection and never answers

    attempts: list[str] = []
    async with sdk(gateway) as client:  # max_retries=0: the client sees every failure
        for index in range(20):
            raw = await client.completions.with_raw_response.create(model="g", prompt=f"q{index}")
            assert raw.parse().choices[0].text == f"echo: q{index}"
            attempts.append(raw.headers["x-gateway-attempts"])

    assert len(a.received) == 2  # once the breaker opened, the down upstream got no more calls
    assert attempts.count("2") == 2  # only those two requests paid for the timeout
    assert attempts.count("1") == 18


async def test_without_the_breaker_a_failing_member_keeps_being_called(
    http: ClientSession, aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, _ = pair
    gateway = await start_gateway(aiohttp_server, pair_config(pair, {"enabled": False, "consecutive_failures": 2}))
    a.script(*[fake.status(500)] * 10)

    served = [await ask(http, gateway) for _ in range(6)]

    assert served == [("b", "2")] * 6
    assert len(a.received) == 6
    assert events(gateway).breaker_transitions == {}


# --- shared through Redis ---


def shared_config(
    pair: tuple[FakeUpstream, FakeUpstream], redis_url: str, prefix: str, **breaker: Any
) -> dict[str, Any]:
    # Redis's calls get 5 s, not the request path's 0.25 s: a loaded machine's slow one would leave a
    # gateway on its own view, and these tests are about the view shared.
    redis = {"url": redis_url, "prefix": prefix, "timeout_s": 5.0}
    return pair_config(pair, {"consecutive_failures": 3, "sync_interval_s": 0, **breaker}, redis=redis)


async def test_two_gateways_sharing_redis_see_the_same_breaker(
    http: ClientSession,
    aiohttp_server: AiohttpServer,
    pair: tuple[FakeUpstream, FakeUpstream],
    redis_url: str,
    redis_prefix: str,
) -> None:
    a, _ = pair
    config = shared_config(pair, redis_url, redis_prefix)
    first = await start_gateway(aiohttp_server, config)
    second = await start_gateway(aiohttp_server, config)
    a.script(*[fake.status(500)] * 10)

    through_first = [await ask(http, first) for _ in range(3)]
    through_second = [await ask(http, second) for _ in range(3)]

    assert through_first == [("b", "2")] * 3
    assert through_second == [("b", "1")] * 3  # the second gateway skips a without ever seeing it fail
    assert len(a.received) == 3
    assert events(first).breaker_transitions == {("a", "open"): 1}
    client = aioredis.from_url(redis_url)
    try:
        assert await client.exists(f"{redis_prefix}breaker:a") == 1
    finally:
        await client.aclose()


async def test_successes_seen_before_another_gateway_opened_the_circuit_do_not_close_it(
    http: ClientSession,
    aiohttp_server: AiohttpServer,
    pair: tuple[FakeUpstream, FakeUpstream],
    redis_url: str,
    redis_prefix: str,
) -> None:
    a, _ = pair
    config = shared_config(pair, redis_url, redis_prefix)
    first = await start_gateway(aiohttp_server, config)
    second = await start_gateway(aiohttp_server, config)
    assert await ask(http, second) == ("a", "1")  # a served the second gateway while it was healthy
    a.script(*[fake.status(500)] * 10)

    for _ in range(3):
        assert await ask(http, first) == ("b", "2")
    through_second = [await ask(http, second) for _ in range(3)]

    assert through_second == [("b", "1")] * 3
    assert len(a.received) == 1 + 3
    assert events(second).breaker_transitions == {}


async def test_a_probe_through_one_gateway_closes_the_circuit_for_both(
    http: ClientSession,
    aiohttp_server: AiohttpServer,
    pair: tuple[FakeUpstream, FakeUpstream],
    redis_url: str,
    redis_prefix: str,
) -> None:
    a, _ = pair
    wall = FakeClock()
    config = shared_config(pair, redis_url, redis_prefix)
    first = await start_gateway(aiohttp_server, config, timing=make_timing(wall=wall))
    second = await start_gateway(aiohttp_server, config, timing=make_timing(wall=wall))
    await opened(http, first, a)
    assert await ask(http, second) == ("b", "1")

    wall.advance(COOLDOWN_S)
    probe = await ask(http, second)
    back_on_first = await ask(http, first)

    assert probe == ("a", "1")
    assert back_on_first == ("a", "1")
    assert len(a.received) == 3 + 2


async def test_concurrent_failures_through_redis_all_count_towards_opening(
    http: ClientSession,
    aiohttp_server: AiohttpServer,
    pair: tuple[FakeUpstream, FakeUpstream],
    redis_url: str,
    redis_prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, _ = pair
    gateway = await start_gateway(aiohttp_server, shared_config(pair, redis_url, redis_prefix, consecutive_failures=16))
    a.script(*[fake.status(500)] * 30)

    during = await asyncio.gather(*[ask(http, gateway) for _ in range(16)])  # a goes down under load
    after = await ask(http, gateway)

    assert during == [("b", "2")] * 16
    assert after == ("b", "1")  # 16 failures: open
    assert len(a.received) == 16
    assert serving(gateway).shared.breakers.store_errors == 0
    assert "unreachable" not in caplog.text


# --- the state machine itself ---

CONFIG = BreakerConfig(consecutive_failures=3, failure_ratio=0.5, window_s=30, min_requests=10, cooldown_s=20)


def test_consecutive_failures_open_the_record() -> None:
    record = BreakerRecord()
    transitions = []
    for second in range(3):
        record, transition = record_outcomes(record, CONFIG, 100.0 + second, successes=0, failures=1)
        transitions.append(transition)

    assert transitions == [None, None, Transition(Circuit.CLOSED, Circuit.OPEN)]
    assert record.opened_at == 102.0
    assert record.circuit(CONFIG, 121.9) is Circuit.OPEN
    assert record.circuit(CONFIG, 122.0) is Circuit.HALF_OPEN


def test_a_batch_of_failures_opens_at_once_and_successes_reset_the_count() -> None:
    record, _ = record_outcomes(BreakerRecord(), CONFIG, 100.0, successes=0, failures=2)
    record, _ = record_outcomes(record, CONFIG, 101.0, successes=1, failures=0)
    assert record.consecutive_failures == 0

    record, transition = record_outcomes(record, CONFIG, 102.0, successes=0, failures=3)
    assert transition == Transition(Circuit.CLOSED, Circuit.OPEN)


def test_the_failure_ratio_needs_min_requests_within_the_window() -> None:
    config = BreakerConfig(consecutive_failures=100, failure_ratio=0.5, window_s=30, min_requests=10, cooldown_s=20)
    record = BreakerRecord()
    record, _ = record_outcomes(record, config, 100.0, successes=4, failures=0)
    record, transition = record_outcomes(record, config, 101.0, successes=0, failures=4)
    assert transition is None  # 4 of 8: the ratio is met, min_requests is not
    record, transition = record_outcomes(record, config, 102.0, successes=1, failures=0)
    assert transition is None  # 4 of 9
    record, transition = record_outcomes(record, config, 103.0, successes=0, failures=1)
    assert transition == Transition(Circuit.CLOSED, Circuit.OPEN)  # 5 of 10

    fresh, _ = record_outcomes(BreakerRecord(), config, 100.0, successes=5, failures=4)
    fresh, transition = record_outcomes(fresh, config, 131.0, successes=0, failures=1)
    assert transition is None  # a new window: 1 of 1
    assert (fresh.window_requests, fresh.window_failures) == (1, 1)


def test_half_open_allows_one_probe_until_it_times_out() -> None:
    record, _ = record_outcomes(BreakerRecord(), CONFIG, 100.0, successes=0, failures=3)

    assert claim_probe(record, CONFIG, 119.0, probe_s=5) is None  # still open
    claimed = claim_probe(record, CONFIG, 120.0, probe_s=5)
    assert claimed is not None
    assert claimed.probe_until == 125.0
    assert claim_probe(claimed, CONFIG, 124.9, probe_s=5) is None  # one probe at a time
    assert claim_probe(claimed, CONFIG, 125.0, probe_s=5) is not None  # that probe never reported back
    assert claim_probe(BreakerRecord(), CONFIG, 120.0, probe_s=5) is None  # closed: nothing to probe


def test_the_probe_outcome_closes_or_reopens() -> None:
    record, _ = record_outcomes(BreakerRecord(), CONFIG, 100.0, successes=0, failures=3)
    probing = claim_probe(record, CONFIG, 121.0, probe_s=5)
    assert probing is not None

    closed, transition = record_outcomes(probing, CONFIG, 122.0, successes=1, failures=0)
    assert transition == Transition(Circuit.HALF_OPEN, Circuit.CLOSED)
    assert closed.circuit(CONFIG, 122.0) is Circuit.CLOSED
    assert (closed.consecutive_failures, closed.window_failures, closed.probe_until) == (0, 0, 0.0)

    reopened, transition = record_outcomes(probing, CONFIG, 122.0, successes=0, failures=1)
    assert transition == Transition(Circuit.HALF_OPEN, Circuit.OPEN)
    assert reopened.opened_at == 122.0
    assert reopened.circuit(CONFIG, 141.9) is Circuit.OPEN
    assert claim_probe(reopened, CONFIG, 142.0, probe_s=5) is not None


def test_a_record_survives_the_round_trip_through_redis_fields() -> None:
    record = BreakerRecord(consecutive_failures=4, window_start=1.5, window_requests=9, opened_at=1e9, probe_until=2.25)
    as_redis_gives_it: dict[str | bytes, str | bytes] = {k.encode(): v.encode() for k, v in record.to_fields().items()}

    assert BreakerRecord.from_fields(as_redis_gives_it) == record
    assert BreakerRecord.from_fields({"consecutive_failures": "x", "opened_at": "7"}) == BreakerRecord(opened_at=7.0)


async def test_local_store_breakers_report_transitions() -> None:
    seen: list[tuple[str, Transition]] = []
    now = FakeClock(100.0)
    breakers = CircuitBreakers(
        CONFIG, LocalBreakerStore(), clock=now, on_transition=lambda name, t: seen.append((name, t))
    )
    for _ in range(3):
        assert await breakers.admit("a", probe_s=5)
        await breakers.record("a", ok=False)

    refused = await breakers.admit("a", probe_s=5)
    now.advance(20)
    probe = await breakers.admit("a", probe_s=5)
    second_probe = await breakers.admit("a", probe_s=5)
    await breakers.record("a", ok=True)

    assert (refused, probe, second_probe) == (False, True, False)
    assert await breakers.admit("a", probe_s=5)
    assert [t.after for _, t in seen] == [Circuit.OPEN, Circuit.HALF_OPEN, Circuit.CLOSED]
