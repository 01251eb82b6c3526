"""The webhook check under load and against hostile services, on real loopback servers: a pool of its
own per check (a slow service never starves another), a bounded wait for a connection reported as
"at capacity", no redirects, and an answer read no further than `max_response_bytes`.
Verdicts are asserted, never durations: a service that must be slower than something else is held
until the test releases it, and the timeouts are far beyond what the calls take."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession, TCPConnector, web
from pytest_aiohttp import AiohttpServer

from policies.guardrails import RequestFacts, close_webhook_sessions
from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream
from tests.support.guardrail_helpers import input_guard


class Service:
    """A guardrail service that answers after a delay (`/after/{ms}`) or once released (`/held`),
    counting the calls it has in flight."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most_in_flight = 0
        self.calls = 0
        self.redirected: list[str] = []
        self.holding = asyncio.Event()  # a `/held` call arrived (its connection is taken)
        self.release = asyncio.Event()  # `/held` calls answer from now on

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/after/{ms}", self.after)
        app.router.add_post("/held", self.held)
        app.router.add_post("/redirect/{status}", self.redirect)
        app.router.add_route("*", "/target", self.target)
        app.router.add_post("/huge", self.huge)
        app.router.add_post("/bomb", self.bomb)
        return app

    async def after(self, request: web.Request) -> web.Response:
        self.calls += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await request.read()
            await asyncio.sleep(int(request.match_info["ms"]) / 1000)
        finally:
            self.in_flight -= 1
        return web.json_response({"flagged": False})

    async def held(self, request: web.Request) -> web.Response:
        self.calls += 1
        self.holding.set()
        await request.read()
        await self.release.wait()
        return web.json_response({"flagged": False})

    async def redirect(self, request: web.Request) -> web.Response:
        status = int(request.match_info["status"])
        return web.Response(status=status, headers={"Location": "/target"})

    async def target(self, request: web.Request) -> web.Response:
        self.redirected.append(request.method)
        return web.json_response({"flagged": False})

    async def huge(self, request: web.Request) -> web.StreamResponse:
        """A valid `flagged: false` answer, streamed (no Content-Length) and far over the cap."""
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"flagged": false, "reason": "')
        for _ in range(64):
            await response.write(b"a" * 4096)
        await response.write(b'"}')
        await response.write_eof()
        return response

    async def bomb(self, request: web.Request) -> web.Response:
        """Small on the wire, large once decompressed."""
        body = b'{"flagged": false, "reason": "' + b"a" * 200_000 + b'"}'
        return web.Response(
            body=gzip.compress(body), headers={"Content-Encoding": "gzip"}, content_type="application/json"
        )


@pytest.fixture(autouse=True)
async def _close_pools() -> AsyncIterator[None]:
    yield
    await close_webhook_sessions()


@pytest.fixture
async def service(aiohttp_server: AiohttpServer) -> tuple[Service, str]:
    fake = Service()
    server = await aiohttp_server(fake.app())
    return fake, str(server.make_url("")).rstrip("/")


def hook(url: str, action: str = "deny", **extra: Any) -> dict[str, Any]:
    return {"check": "webhook", "url": url, "action": action, **extra}


async def test_hundreds_of_concurrent_checks_queue_for_the_pool_and_all_pass(service: tuple[Service, str]) -> None:
    fake, base = service
    guard = input_guard(hook(f"{base}/after/20", timeout_ms=60_000, max_wait_ms=60_000, max_connections=16))
    outcomes = await asyncio.gather(*(guard.check(f"prompt {i}", RequestFacts()) for i in range(320)))
    verdicts = [outcome.verdicts[0] for outcome in outcomes]
    assert [v for v in verdicts if v.verdict != "pass"] == []
    assert fake.calls == 320
    assert fake.most_in_flight <= 16  # the pool bounds the connections to the service


async def test_when_the_pool_is_full_past_max_wait_the_verdict_says_at_capacity(service: tuple[Service, str]) -> None:
    fake, base = service
    check = hook(f"{base}/held", timeout_ms=60_000, max_wait_ms=50, max_connections=1, fail_open=True)
    guard = input_guard(check)
    holding = asyncio.ensure_future(guard.check("prompt 0", RequestFacts()))
    try:
        async with asyncio.timeout(30):  # a bound for a broken pool, not a duration expected
            await fake.holding.wait()  # the pool's one connection is taken until the service is released
            waiting = await guard.check("prompt 1", RequestFacts())
            other = input_guard({**check, "url": f"{base}/after/1", "fail_open": False})
            closed = await other.check("x", RequestFacts())  # meanwhile, another check: its own pool
    finally:
        fake.release.set()
    held = await holding

    assert held.verdicts[0].verdict == "pass"
    assert waiting.verdicts[0].verdict == "error"
    reason = waiting.verdicts[0].reason or ""
    assert "webhook at capacity" in reason
    assert "timed out" not in reason
    assert "failing open" in reason
    assert closed.denied is None  # the full pool of the other check is not its business


async def test_a_slow_webhook_of_one_policy_does_not_fail_another_policys_webhook(
    make_gateway: GatewayFactory, upstream: FakeUpstream, service: tuple[Service, str]
) -> None:
    fake, base = service
    # The slow service answers only once every fast request is answered. With a pool shared by both
    # checks the fast ones would wait for connections the slow ones never give back, and fail (at
    # capacity, so denied); each with its own pool, they never wait for the slow ones. The timeouts
    # and deadlines are far beyond what any call takes: no verdict depends on the machine's speed.
    unhurried = {"deadline_ms": 600_000}
    slow = hook(f"{base}/held", timeout_ms=60_000, max_wait_ms=100, max_connections=4, fail_open=True)
    fast = hook(f"{base}/after/10", timeout_ms=60_000, max_wait_ms=60_000)
    gateway = await make_gateway(
        {
            "deployments": [
                deployment("slow", upstream.base_url, retries=0, policies=["slow"]),
                deployment("fast", upstream.base_url, retries=0, policies=["fast"]),
            ],
            "policies": {
                "slow": {"input": [slow], "guardrails": unhurried},
                "fast": {"input": [fast], "guardrails": unhurried},
            },
        }
    )

    async def post(http: ClientSession, model: str, i: int) -> tuple[int, dict[str, Any]]:
        body = {"model": model, "prompt": f"prompt {i}", "max_tokens": 1}
        async with http.post(gateway.make_url("/v1/completions"), json=body) as response:
            return response.status, orjson.loads(await response.read())

    async with ClientSession(connector=TCPConnector(limit=0)) as http:
        slow_calls = asyncio.gather(*(post(http, "slow", i) for i in range(150)))
        try:
            async with asyncio.timeout(120):  # a bound for broken pools, not a duration expected
                await fake.holding.wait()  # the slow service holds its first calls
                fast_answers = await asyncio.gather(*(post(http, "fast", i) for i in range(150)))
        finally:
            fake.release.set()
        slow_answers = await slow_calls
    assert {status for status, _ in fast_answers} == {200}
    fast_verdicts = [body["guardrail_results"][0] for _, body in fast_answers]
    assert {v["verdict"] for v in fast_verdicts} == {"pass"}
    slow_verdicts = [body["guardrail_results"][0] for _, body in slow_answers]
    assert {v["verdict"] for v in slow_verdicts} <= {"pass", "error"}
    for verdict in slow_verdicts:
        if verdict["verdict"] == "error":
            assert "webhook at capacity" in verdict["reason"]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirect_is_a_failure_naming_it_and_is_not_followed(service: tuple[Service, str], status: int) -> None:
    fake, base = service
    guard = input_guard(hook(f"{base}/redirect/{status}", headers={"Authorization": "Bearer guard-secret"}))
    outcome = await guard.check("hello", RequestFacts())
    assert outcome.denied is not None
    reason = outcome.denied.reason or ""
    assert f"redirect (HTTP {status})" in reason
    assert "failing closed" in reason
    assert fake.redirected == []  # the target received nothing: no POST turned GET, no credentials


@pytest.mark.parametrize("path", ["/huge", "/bomb"])
async def test_an_answer_over_max_response_bytes_is_a_failure_not_accepted(
    service: tuple[Service, str], path: str
) -> None:
    _, base = service
    capped = input_guard(hook(base + path, max_response_bytes=4096))
    denied = await capped.check("hello", RequestFacts())
    assert denied.denied is not None
    assert "larger than max_response_bytes (4096)" in (denied.denied.reason or "")
    fail_open = await input_guard(hook(base + path, max_response_bytes=4096, fail_open=True)).check(
        "hello", RequestFacts()
    )
    assert fail_open.verdicts[0].verdict == "error"  # not a pass: the answer was never read
    accepted = await input_guard(hook(base + path)).check("hello", RequestFacts())  # the default 1 MiB
    assert accepted.verdicts[0].verdict == "pass"
