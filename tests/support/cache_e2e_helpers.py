"""Helpers for the cache's end-to-end tests: a gateway config whose deployment has a cache policy,
requests that return what a client sees, scripted upstream answers, and a throwaway redis-server
of the test's own (to stop it mid-test)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import openai
import orjson
import pytest
import redis.asyncio as aioredis
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from multidict import CIMultiDictProxy

from policies.cache.response_cache import ResponseCache
from tests.conftest import deployment
from tests.support.fake_upstream import Behaviour, FakeUpstream, completion

Json = dict[str, Any]
POLICY = "cached"
KEYS_ENV = {"TEAM_A_KEY": "sk-team-a-0123456789", "TEAM_B_KEY": "sk-team-b-0123456789"}
STATUS = "x-gateway-cache-status"


def cache_config(
    upstream: FakeUpstream,
    *,
    redis_url: str = "",
    prefix: str = "gateway:",
    policy: Json | None = None,
    cache: Json | None = None,
    keys: bool = False,
) -> Json:
    """One deployment, `fake`, on `upstream`, whose policy caches (with `policy`'s settings). With
    Redis, each of its calls may take up to a second (`cache` may say otherwise): the default 10 ms
    makes a loaded machine's Redis a miss, or an entry never stored."""
    fake = deployment("fake", upstream.base_url, aliases=["fake-model"], timeout_s=30, retries=0, policies=[POLICY])
    config: Json = {"deployments": [fake], "policies": {POLICY: {"cache": policy or {}}}}
    if redis_url:
        config["redis"] = {"url": redis_url, "prefix": prefix}
        cache = {"redis_timeout_ms": 1000, **(cache or {})}
    if cache is not None:
        config["cache"] = cache
    if keys:
        config["keys"] = [{"name": "team-a", "key": "${TEAM_A_KEY}"}, {"name": "team-b", "key": "${TEAM_B_KEY}"}]
    return config


def body(prompt: str = "Say this is a test", **fields: Any) -> Json:
    return {"model": "fake", "prompt": prompt, "max_tokens": 8, "temperature": 0, **fields}


@dataclass(frozen=True)
class Seen:
    """A response as the client got it."""

    status: int
    headers: CIMultiDictProxy[str]
    raw: bytes

    @property
    def cache(self) -> str | None:
        return self.headers.get(STATUS)

    @property
    def json(self) -> Json:
        parsed: Json = orjson.loads(self.raw)
        return parsed

    @property
    def text(self) -> str:
        text: str = self.json["choices"][0]["text"]
        return text


async def post(http: ClientSession, gateway: TestServer, payload: Json, headers: dict[str, str] | None = None) -> Seen:
    async with http.post(gateway.make_url("/v1/completions"), json=payload, headers=headers or {}) as response:
        return Seen(response.status, response.headers, await response.read())


def sdk(gateway: TestServer, api_key: str = "unused") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key=api_key, max_retries=0)


async def sdk_stream(client: openai.AsyncOpenAI, **fields: Any) -> tuple[str, str | None, list[str], Json | None]:
    """Stream with the SDK: (the text, the cache status, each chunk's text, the final usage)."""
    raw = await client.completions.with_raw_response.create(**{**body(), **fields, "stream": True})
    texts: list[str] = []
    usage = None
    async for chunk in raw.parse():
        texts.extend(choice.text for choice in chunk.choices)
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
    return "".join(texts), raw.headers.get(STATUS), texts, usage


def answer_text(text: str) -> Behaviour:
    """A plain answer with `text`, whatever the prompt (to tell a refreshed answer from the stored one)."""

    async def behaviour(request: web.Request, payload: Json) -> web.StreamResponse:
        return web.Response(body=orjson.dumps(completion(payload, text)), content_type="application/json")

    return behaviour


def arrivals(monkeypatch: pytest.MonkeyPatch, step: str) -> list[None]:
    """One item per request that reached the response cache's coalescing (`fill`: a plain answer;
    `share_stream`: a stream). Each joins the call in flight as it arrives there, with no wait
    between: a test that holds the upstream until all have arrived sees them coalesced on any
    machine, where a fixed pause let a slow one arrive after the answer (a HIT, or a second call)."""
    arrived: list[None] = []
    original = getattr(ResponseCache, step)

    def counted(self: ResponseCache, *args: Any, **kwargs: Any) -> Any:
        arrived.append(None)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ResponseCache, step, counted)
    return arrived


def held_failure(release: asyncio.Event, status: int = 500) -> Behaviour:
    """An error answer, once `release` is set."""

    async def behaviour(request: web.Request, payload: Json) -> web.StreamResponse:
        await release.wait()
        error = {"error": {"message": f"fake {status}", "type": "server_error"}}
        return web.Response(status=status, body=orjson.dumps(error), content_type="application/json")

    return behaviour


def failing_after(seconds: float, status: int = 500) -> Behaviour:
    async def behaviour(request: web.Request, payload: Json) -> web.StreamResponse:
        await asyncio.sleep(seconds)
        error = {"error": {"message": f"fake {status}", "type": "server_error"}}
        return web.Response(status=status, body=orjson.dumps(error), content_type="application/json")

    return behaviour


@dataclass
class RedisProcess:
    url: str
    process: asyncio.subprocess.Process

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
            await self.process.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@asynccontextmanager
async def own_redis(port: int | None = None, *extra: str, url: str | None = None) -> AsyncIterator[RedisProcess]:
    """A redis-server (on a free port unless given), without persistence, stopped (by its pid) at
    the end. `extra`: more server options; `url`: how to reach it when they change that."""
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.skip("redis-server is not installed (scripts/test.sh installs it)")
    port = free_port() if port is None else port
    args = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", *extra]
    process = await asyncio.create_subprocess_exec(
        executable, *args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    server = RedisProcess(url or f"redis://127.0.0.1:{port}/0", process)
    try:
        await _wait_for_ping(server.url)
        yield server
    finally:
        await server.stop()


async def _wait_for_ping(url: str) -> None:
    client = aioredis.from_url(url)
    try:
        for _ in range(200):
            try:
                if await client.ping():
                    return
            except (OSError, aioredis.ConnectionError, aioredis.AuthenticationError):
                await asyncio.sleep(0.025)
        raise AssertionError(f"redis-server at {url} did not start")
    finally:
        await client.aclose()
