"""Shared fixtures: a real loopback upstream, the real gateway app on a real socket, the real SDK."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import openai
import pytest
import redis.asyncio as aioredis
import yaml
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from gateway.app import create_app
from gateway.config.loader import parse_config
from tests.support.fake_upstream import FakeUpstream
from tests.support.postgres_helpers import ThrowawayPostgres, create_schema, drop_schema, server_url, with_schema

GatewayFactory = Callable[..., Awaitable[TestServer]]


@pytest.fixture
def redis_url() -> str:
    return os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
async def redis_prefix(redis_url: str) -> AsyncIterator[str]:
    """A `redis.prefix` of this test's own; only the keys under it are deleted afterwards."""
    prefix = f"test:gateway:{uuid.uuid4().hex}:"
    yield prefix
    client = aioredis.from_url(redis_url)
    try:
        keys = [key async for key in client.scan_iter(match=prefix + "*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.fixture
def redis_settings(redis_url: str, redis_prefix: str) -> dict[str, Any]:
    """A config's `redis:` block, under this test's own prefix. Its `timeout_s` (the request path's
    bound on each Redis call, 0.25 s by default) is 5 s: a loaded machine's Redis call must not turn
    into a limit failing open or closed, or a key store unavailable, in tests of something else. What a
    slow or absent Redis does is tested where Redis is made slow (tests/policies/redis/test_redis_timeout.py)
    or absent."""
    return {"url": redis_url, "prefix": redis_prefix, "timeout_s": 5.0}


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    """A PostgreSQL URL (`PG_URL`'s server) whose tables land in a schema of this test's own, dropped after it."""
    server = await server_url()
    schema = await create_schema(server)
    yield with_schema(server, schema)
    await drop_schema(server, schema)


@pytest.fixture
def throwaway_postgres() -> Iterator[ThrowawayPostgres]:
    """A PostgreSQL cluster of this test's own, running; the test may stop and start it."""
    cluster = ThrowawayPostgres().initialise()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()


@pytest.fixture
async def upstream(aiohttp_server: AiohttpServer) -> FakeUpstream:
    fake = FakeUpstream()
    server = await aiohttp_server(fake.app())  # test servers cancel handlers of gone clients, as `gateway serve` does
    fake.base_url = str(server.make_url("/v1"))
    return fake


def upstream_url(fake: FakeUpstream) -> str:
    return fake.base_url


def deployment(name: str, base_url: str, **extra: Any) -> dict[str, Any]:
    provider = {"type": "openai", "base_url": base_url, **extra.pop("provider", {})}
    return {"name": name, "provider": provider, **extra}


@pytest.fixture
async def make_gateway(aiohttp_server: AiohttpServer) -> GatewayFactory:
    """Start the gateway on a loopback port from a config mapping (and an environment)."""

    async def start(config: dict[str, Any], env: dict[str, str] | None = None) -> TestServer:
        loaded = parse_config(yaml.safe_dump(config), env or {}, source="test-config.yaml")
        return await aiohttp_server(
            create_app(loaded)
        )  # test servers cancel handlers of gone clients, as `gateway serve` does

    return start


@pytest.fixture
async def gateway(make_gateway: GatewayFactory, upstream: FakeUpstream) -> TestServer:
    """An open gateway with one deployment, `fake` (alias `fake-model`), on the fake upstream.
    It does not retry, so each scripted upstream failure reaches the client; the routing tests
    configure retries and fallbacks themselves. Its timeout is far past any answer of the fake's on
    a loaded machine: the tests of timeouts set their own."""
    fake = deployment("fake", upstream_url(upstream), aliases=["fake-model"], timeout_s=30, retries=0)
    config = {"deployments": [fake]}
    return await make_gateway(config)


@pytest.fixture
async def client(gateway: TestServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        yield sdk


@pytest.fixture
async def http() -> AsyncIterator[ClientSession]:
    async with ClientSession() as session:
        yield session
