"""Helpers for the per-provider tests: start a fake, then a gateway with one deployment on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import openai
from pytest_aiohttp import AiohttpServer

from tests.conformance.fake_api import PROVIDER_KEY, FakeAPI
from tests.conftest import GatewayFactory

Fake = TypeVar("Fake", bound=FakeAPI)
DEPLOYMENT = "conf"


async def start_fake(aiohttp_server: AiohttpServer, fake: Fake) -> Fake:
    server = await aiohttp_server(fake.app())
    fake.base_url = str(server.make_url("")).rstrip("/")
    return fake


@asynccontextmanager
async def sdk_on(
    make_gateway: GatewayFactory, provider: dict[str, Any], *, timeout_s: float = 30.0, retries: int = 0
) -> AsyncIterator[openai.AsyncOpenAI]:
    """The `openai` SDK on a gateway whose one deployment, `conf`, has this `provider:` block
    (and no retries unless asked, so every scripted upstream failure reaches the client)."""
    deployment = {"name": DEPLOYMENT, "provider": provider, "timeout_s": timeout_s, "retries": retries}
    config = {"deployments": [deployment]}
    gateway = await make_gateway(config, {"PROVIDER_KEY": PROVIDER_KEY})
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        yield sdk
