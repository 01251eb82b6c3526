"""Load balancing inside a group: weighted random, round robin, least busy, lowest latency, priority."""

from __future__ import annotations

import asyncio
import math
import random
from collections import Counter
from typing import Any

import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from gateway.config.routing import Strategy
from gateway.routing.deployments import Deployment, StatsBoard
from gateway.routing.strategies import Balancer
from tests.conftest import deployment
from tests.support import fake_upstream as fake
from tests.support.fake_clock import FakeClock
from tests.support.fake_upstream import FakeUpstream
from tests.support.routing_helpers import (
    Upstreams,
    completion,
    eventually,
    make_timing,
    post,
    served_by,
    start_gateway,
)
from tests.support.stream_helpers import Gate


@pytest.fixture
def upstreams(aiohttp_server: AiohttpServer) -> Upstreams:
    return Upstreams(aiohttp_server)


def group_config(
    members: dict[str, FakeUpstream], strategy: str | None, settings: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Every upstream a deployment of the alias `g` (no retries), with the group's strategy."""
    deployments = [
        deployment(name, upstream.base_url, aliases=["g"], retries=0, timeout_s=30, **(settings or {}).get(name, {}))
        for name, upstream in members.items()
    ]
    routing: dict[str, Any] = {"groups": [{"alias": "g", "strategy": strategy}] if strategy else []}
    return {"deployments": deployments, "routing": routing}


async def serve_many(http: ClientSession, gateway: TestServer, times: int, model: str = "g") -> list[str]:
    return [await served_by(http, gateway, completion(model, f"p{index}")) for index in range(times)]


async def test_weighted_random_follows_the_weights(
    http: ClientSession, aiohttp_server: AiohttpServer, upstreams: Upstreams
) -> None:
    a, b = await upstreams.start_many("a", "b")
    config = group_config({"a": a, "b": b}, None, {"a": {"weight": 3}, "b": {"weight": 1}})  # weighted: the default
    gateway = await start_gateway(aiohttp_server, config)
    requests = 400

    served = Counter(await serve_many(http, gateway, requests))

    # Binomial(400, 3/4): mean 300, sd 8.7; 4.5 sd either way (the seeded rng makes it reproducible).
    tolerance = 4.5 * math.sqrt(requests * 0.75 * 0.25)
    assert abs(served["a"] - 300) <= tolerance, served
    assert served["a"] + served["b"] == requests
    assert (len(a.received), len(b.received)) == (served["a"], served["b"])


def test_weighted_choice_tracks_weights_over_many_draws() -> None:
    """The same property at the balancer, over enough draws for a tight bound (seeded: cannot flake)."""
    members = [Deployment("a", "openai", 1, None, weight=3), Deployment("b", "openai", 1, None, weight=1)]
    balancer = Balancer(StatsBoard(), random.Random(11))  # noqa: S311
    draws = 20_000

    picks = Counter(balancer.pick(Strategy.WEIGHTED, ("alias", "g"), members, members).name for _ in range(draws))

    assert abs(picks["a"] / draws - 0.75) < 4.5 * math.sqrt(0.75 * 0.25 / draws)


def test_balancer_round_robin_alternates_and_skips_ineligible_members() -> None:
    members = [Deployment(name, "openai", 1, None) for name in "abc"]
    balancer = Balancer(StatsBoard(), random.Random(1))  # noqa: S311

    picks = [balancer.pick(Strategy.ROUND_ROBIN, ("alias", "g"), members, members).name for _ in range(6)]
    without_b = [balancer.pick(Strategy.ROUND_ROBIN, ("alias", "g"), members, members[::2]).name for _ in range(4)]

    assert picks == ["a", "b", "c", "a", "b", "c"]
    assert without_b == ["a", "c", "c", "a"]  # b's turn goes to the next eligible member


@pytest.mark.parametrize("where", ["group", "routing"])
async def test_round_robin_alternates_exactly(
    http: ClientSession, aiohttp_server: AiohttpServer, upstreams: Upstreams, where: str
) -> None:
    a, b, c = await upstreams.start_many("a", "b", "c")
    members = {"a": a, "b": b, "c": c}
    config = group_config(members, "round_robin" if where == "group" else None)
    if where == "routing":
        config["routing"]["strategy"] = "round_robin"

    gateway = await start_gateway(aiohttp_server, config)

    served = await serve_many(http, gateway, 6)

    assert served in (["a", "b", "c"] * 2, ["b", "c", "a"] * 2, ["c", "a", "b"] * 2)
    assert [len(u.received) for u in members.values()] == [2, 2, 2]


async def test_least_busy_prefers_the_idle_member(
    http: ClientSession, aiohttp_server: AiohttpServer, upstreams: Upstreams
) -> None:
    a, b = await upstreams.start_many("a", "b")
    members = {"a": a, "b": b}
    gate = Gate()  # the first call is held until the others are served: busy however long they take
    for upstream in members.values():
        upstream.script(gate.answer(upstream))
    gateway = await start_gateway(aiohttp_server, group_config(members, "least_busy"))

    slow = asyncio.create_task(post(http, gateway, completion("g", "slow")))
    await eventually(lambda: a.received or b.received)
    busy = "a" if a.received else "b"
    idle = "b" if busy == "a" else "a"
    members[idle].queued.clear()  # the idle one answers at once

    served = await serve_many(http, gateway, 5)
    gate.release.set()
    status, _, headers = await slow

    assert served == [idle] * 5
    assert status == 200
    assert headers["x-gateway-deployment"] == busy
    assert len(members[busy].received) == 1


async def test_lowest_latency_prefers_the_faster_member_once_both_are_measured(
    http: ClientSession, aiohttp_server: AiohttpServer, upstreams: Upstreams
) -> None:
    slow, quick = await upstreams.start_many("slow", "quick")
    clock = FakeClock()  # the gateway's: each member's latency is what the test says, on any machine

    async def a_second_on_the_gateways_clock(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        clock.advance(1.0)
        return await fake.answer()(request, body)

    slow.script(*[a_second_on_the_gateways_clock for _ in range(3)])
    config = group_config({"slow": slow, "quick": quick}, "lowest_latency")
    gateway = await start_gateway(aiohttp_server, config, timing=make_timing(clock=clock))

    first_two = await serve_many(http, gateway, 2)
    after = await serve_many(http, gateway, 10)

    assert sorted(first_two) == ["quick", "slow"]  # each is measured once
    assert after == ["quick"] * 10
    assert len(slow.received) == 1


async def test_priority_uses_the_lowest_number_and_moves_on_only_on_failure(
    http: ClientSession, aiohttp_server: AiohttpServer, upstreams: Upstreams
) -> None:
    first, second, third = await upstreams.start_many("first", "second", "third")
    members = {"second": second, "first": first, "third": third}  # config order is not priority order
    settings = {"first": {"priority": 1}, "second": {"priority": 5}, "third": {"priority": 9}}
    gateway = await start_gateway(aiohttp_server, group_config(members, "priority", settings))

    healthy = await serve_many(http, gateway, 5)
    first.script(fake.status(503))
    one_down = await served_by(http, gateway, completion("g"))
    first.script(fake.status(503))
    second.script(fake.status(500))
    two_down = await served_by(http, gateway, completion("g"))

    assert healthy == ["first"] * 5
    assert one_down == "second"
    assert two_down == "third"
    assert (len(first.received), len(second.received), len(third.received)) == (7, 2, 1)


async def test_priority_spreads_over_members_of_equal_priority(
    http: ClientSession, aiohttp_server: AiohttpServer, upstreams: Upstreams
) -> None:
    a, b, c = await upstreams.start_many("a", "b", "c")
    settings = {"a": {"priority": 0}, "b": {"priority": 0}, "c": {"priority": 1}}
    config = group_config({"a": a, "b": b, "c": c}, None, settings)
    config["routing"]["strategy"] = "priority"  # the routing-wide default applies to the group
    gateway = await start_gateway(aiohttp_server, config)

    served = Counter(await serve_many(http, gateway, 20))

    assert set(served) == {"a", "b"}
    assert c.received == []
