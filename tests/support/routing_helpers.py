"""Helpers for the routing tests: several named loopback upstreams, a gateway built with an injected
`Timing` (recording sleep, seeded rng, hand-driven clocks), and small request helpers."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import openai
import yaml
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from aiohttp.typedefs import Handler
from multidict import CIMultiDict
from pytest_aiohttp import AiohttpServer

from gateway.app import create_app
from gateway.config.loader import load_config, parse_config
from gateway.http.app_keys import SERVING
from gateway.pipeline.serving import ServingState
from gateway.routing.attempts import Timing
from gateway.routing.events import RoutingEvents
from tests.support.fake_clock import FakeClock
from tests.support.fake_upstream import FakeUpstream

Json = dict[str, Any]


class Upstreams:
    """Start named fake upstreams; `calls` is the order in which any of them was called."""

    def __init__(self, server_factory: AiohttpServer) -> None:
        self._server_factory = server_factory
        self.calls: list[str] = []

    async def start(self, name: str) -> FakeUpstream:
        fake = FakeUpstream()
        app = fake.app()
        app.middlewares.append(_call_logger(name, self.calls))
        server = await self._server_factory(app)
        fake.base_url = str(server.make_url("/v1"))
        return fake

    async def start_many(self, *names: str) -> list[FakeUpstream]:
        return [await self.start(name) for name in names]


def _call_logger(name: str, calls: list[str]) -> Any:
    @web.middleware
    async def log_call(request: web.Request, handler: Handler) -> web.StreamResponse:
        calls.append(name)
        return await handler(request)

    return log_call


class RecordingSleep:
    """Records every backoff delay instead of waiting; optionally advances a fake clock by it."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.delays: list[float] = []
        self._clock = clock

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self._clock is not None:
            self._clock.advance(seconds)


def make_timing(
    sleep: RecordingSleep | None = None,
    *,
    seed: int = 7,
    clock: FakeClock | None = None,
    wall: FakeClock | None = None,
) -> Timing:
    result = Timing(sleep=sleep or RecordingSleep(), rng=random.Random(seed))  # noqa: S311 (reproducible jitter and choices)
    if clock is not None:
        result.clock = clock
    if wall is not None:
        result.wall = wall
    return result


async def start_gateway(
    server_factory: AiohttpServer,
    config: Json,
    *,
    env: dict[str, str] | None = None,
    timing: Timing | None = None,
) -> TestServer:
    loaded = parse_config(yaml.safe_dump(config), env or {}, source="routing-test.yaml")
    return await server_factory(create_app(loaded, timing=timing or make_timing()))


async def start_gateway_from_file(
    server_factory: AiohttpServer, path: Path, *, timing: Timing | None = None
) -> TestServer:
    return await server_factory(create_app(load_config(path), config_path=str(path), timing=timing or make_timing()))


def write_config(path: Path, config: Json) -> None:
    write_text(path, yaml.safe_dump(config))


def write_text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


async def eventually(condition: Callable[[], object], timeout_s: float = 30.0) -> None:
    """Wait (polling) until `condition()` is true; fail after `timeout_s` (a bound for a hang, not a
    speed expected: what is awaited takes moments, more on a loaded machine)."""
    for _ in range(int(timeout_s / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"condition not met within {timeout_s} s")


def serving(server: TestServer) -> ServingState:
    app = server.app
    assert app is not None
    return app[SERVING]


def events(server: TestServer) -> RoutingEvents:
    return serving(server).shared.events


def completion(model: str = "g", prompt: str = "hi", **extra: Any) -> Json:
    return {"model": model, "prompt": prompt, **extra}


async def post(
    http: ClientSession, server: TestServer, body: Json, headers: dict[str, str] | None = None
) -> tuple[int, Json, CIMultiDict[str]]:
    async with http.post(server.make_url("/v1/completions"), json=body, headers=headers or {}) as response:
        return response.status, await response.json(), response.headers.copy()


async def served_by(http: ClientSession, server: TestServer, body: Json, headers: dict[str, str] | None = None) -> str:
    """Send one request that must succeed; the deployment that answered it."""
    status, payload, response_headers = await post(http, server, body, headers)
    assert status == 200, payload
    return response_headers["x-gateway-deployment"]


@asynccontextmanager
async def sdk(server: TestServer, headers: dict[str, str] | None = None) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=str(server.make_url("/v1")), api_key="unused", max_retries=0, default_headers=headers or {}, timeout=60
    ) as client:
        yield client
