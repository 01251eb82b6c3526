"""Fixtures of the conformance suite: each test runs once per provider case, against that
provider's loopback fake, through the real gateway app, with the official `openai` SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import openai
import pytest
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from tests.conformance.cases import CASES, ProviderCase
from tests.conformance.fake_api import PROVIDER_KEY, FakeAPI
from tests.conformance.harness import DEPLOYMENT, start_fake
from tests.conftest import GatewayFactory

__all__ = ["DEPLOYMENT", "StartGateway", "cases", "needs", "sdk_for"]
StartGateway = Callable[..., Awaitable[TestServer]]


def cases(given: list[ProviderCase]) -> Any:
    """The `case` fixture over these cases (a module whose API more cases serve overrides it so)."""

    @pytest.fixture(params=given, ids=str)
    def case(request: pytest.FixtureRequest) -> ProviderCase:
        chosen: ProviderCase = request.param
        return chosen

    return case


case = cases(CASES)


@pytest.fixture
async def fake(case: ProviderCase, aiohttp_server: AiohttpServer) -> FakeAPI:
    return await start_fake(aiohttp_server, case.fake())  # test servers cancel handlers of gone clients


@pytest.fixture
def start_gateway(make_gateway: GatewayFactory, case: ProviderCase, fake: FakeAPI) -> StartGateway:
    """A gateway with one deployment, `conf`, on the case's fake; no retries, so every scripted
    upstream failure reaches the client."""

    async def start(
        *,
        timeout_s: float = 30.0,  # far past any answer of a fake's (or the local engine's) on a loaded machine
        key: str = PROVIDER_KEY,
        keys: dict[str, str] | None = None,  # the gateway's keys, by name, each its own secret
        **provider: Any,
    ) -> TestServer:
        block = {**case.provider(fake), **provider}
        config: dict[str, Any] = {
            "deployments": [{"name": DEPLOYMENT, "provider": block, "timeout_s": timeout_s, "retries": 0}]
        }
        env = {"PROVIDER_KEY": key}
        if keys:
            config["keys"] = [{"name": name, "key": "${KEY_" + name.upper() + "}"} for name in keys]
            env.update({f"KEY_{name.upper()}": secret for name, secret in keys.items()})
        return await make_gateway(config, env)

    return start


@pytest.fixture
async def gateway(start_gateway: StartGateway) -> TestServer:
    return await start_gateway()


@pytest.fixture
async def client(gateway: TestServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with sdk_for(gateway) as sdk:
        yield sdk


def sdk_for(gateway: TestServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0)


def needs(case: ProviderCase, behaviour: str) -> None:
    if behaviour not in case.supports:
        pytest.skip(f"the {case.type} case cannot be scripted to {behaviour}")
