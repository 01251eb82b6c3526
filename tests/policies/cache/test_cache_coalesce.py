"""Single-flight: identical misses in flight at once reach the upstream once."""

from __future__ import annotations

import asyncio

import pytest

from gateway.api.errors import UpstreamError
from policies.cache import SingleFlight


class Upstream:
    """A producer that counts its calls and answers when released."""

    def __init__(self) -> None:
        self.calls = 0
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.error: Exception | None = None

    async def __call__(self) -> str:
        self.calls += 1
        call = self.calls
        self.started.set()
        await self.release.wait()
        if self.error is not None:
            raise self.error
        return f"answer {call}"


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_ten_identical_concurrent_misses_make_one_call() -> None:
    flights: SingleFlight[str] = SingleFlight()
    upstream = Upstream()
    tasks = [asyncio.create_task(flights.run("k", upstream)) for _ in range(10)]
    await settle()
    upstream.release.set()
    results = await asyncio.gather(*tasks)
    assert upstream.calls == 1
    assert [value for value, _ in results] == ["answer 1"] * 10
    assert sum(led for _, led in results) == 1
    assert flights.shared == 9
    assert len(flights) == 0


async def test_different_keys_are_not_coalesced_and_later_calls_call_again() -> None:
    flights: SingleFlight[str] = SingleFlight()
    upstream = Upstream()
    upstream.release.set()
    results = await asyncio.gather(flights.run("a", upstream), flights.run("b", upstream))
    assert sorted(value for value, _ in results) == ["answer 1", "answer 2"]
    assert await flights.run("a", upstream) == ("answer 3", True)  # nothing is cached at this level


async def test_leader_failure_reaches_every_waiter() -> None:
    flights: SingleFlight[str] = SingleFlight()
    upstream = Upstream()
    upstream.error = UpstreamError("The upstream returned 500.", headers={"x-gateway-attempts": "3"})
    tasks = [asyncio.create_task(flights.run("k", upstream)) for _ in range(10)]
    await settle()
    upstream.release.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert upstream.calls == 1
    assert all(isinstance(r, UpstreamError) for r in results)
    errors = [r for r in results if isinstance(r, UpstreamError)]
    assert {(e.status, e.message, e.headers["x-gateway-attempts"]) for e in errors} == {
        (502, "The upstream returned 500.", "3")
    }
    errors[1].headers["x-gateway-deployment"] = "mine"  # each waiter's handler may add its own headers
    assert "x-gateway-deployment" not in errors[2].headers
    assert len(flights) == 0


async def test_a_cancelled_leader_hands_over_to_a_waiter() -> None:
    flights: SingleFlight[str] = SingleFlight()
    upstream = Upstream()
    leader = asyncio.create_task(flights.run("k", upstream))
    await upstream.started.wait()
    waiters = [asyncio.create_task(flights.run("k", upstream)) for _ in range(5)]
    await settle()
    leader.cancel()  # the leader's client disconnected
    await settle()
    assert len(flights) == 1  # a waiter took over at once
    upstream.release.set()
    results = await asyncio.wait_for(asyncio.gather(*waiters), timeout=30)  # a bound for a hang, not a speed
    assert leader.cancelled()
    assert upstream.calls == 2  # the cancelled call, and the new leader's
    assert [value for value, _ in results] == ["answer 2"] * 5
    assert sum(led for _, led in results) == 1
    assert len(flights) == 0


async def test_a_cancelled_leader_without_waiters_leaves_nothing_behind() -> None:
    flights: SingleFlight[str] = SingleFlight()
    upstream = Upstream()
    leader = asyncio.create_task(flights.run("k", upstream))
    await upstream.started.wait()
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    assert len(flights) == 0
    upstream.release.set()
    assert await flights.run("k", upstream) == ("answer 2", True)


async def test_a_cancelled_waiter_does_not_disturb_the_others() -> None:
    flights: SingleFlight[str] = SingleFlight()
    upstream = Upstream()
    tasks = [asyncio.create_task(flights.run("k", upstream)) for _ in range(3)]
    await settle()
    tasks[1].cancel()
    await settle()
    upstream.release.set()
    first, third = await tasks[0], await tasks[2]
    assert tasks[1].cancelled()
    assert first == ("answer 1", True)
    assert third == ("answer 1", False)
    assert upstream.calls == 1
