"""GET /v1/models, /health and /ready, and API keys in front of them."""

from __future__ import annotations

import hashlib
from typing import Any

import openai
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream
from tests.support.observability_helpers import once_redis_answers
from tests.support.redis_helpers import RedisProxy

TEAM_KEY = "gw-team-key-1234567890"
CI_KEY = "gw-ci-key-0987654321"


@pytest.fixture
async def keyed(make_gateway: GatewayFactory, upstream: FakeUpstream) -> TestServer:
    config = {
        "keys": [
            {"name": "team", "key": "${TEAM_KEY}", "deployments": ["*"]},
            {"name": "ci", "sha256": hashlib.sha256(CI_KEY.encode()).hexdigest(), "deployments": ["small"]},
        ],
        "deployments": [
            deployment("small", upstream.base_url, aliases=["s"]),
            deployment("large", upstream.base_url),
            deployment("broken", upstream.base_url, provider={"api_key": "${UNSET_KEY}"}),
        ],
    }
    return await make_gateway(config, {"TEAM_KEY": TEAM_KEY})


def sdk(gateway: TestServer, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key=key, max_retries=0)


async def test_models_lists_what_the_key_may_use(keyed: TestServer) -> None:
    async with sdk(keyed, TEAM_KEY) as team, sdk(keyed, CI_KEY) as ci:
        team_ids = [model.id async for model in team.models.list()]
        ci_ids = [model.id async for model in ci.models.list()]

    assert team_ids == ["small", "s", "large"]  # "broken" cannot serve, so it is not offered
    assert ci_ids == ["small", "s"]


async def test_missing_and_unknown_keys_are_401(keyed: TestServer, http: ClientSession) -> None:
    body = {"model": "small", "prompt": "x"}
    async with http.post(keyed.make_url("/v1/completions"), json=body) as missing:
        missing_body = await missing.json()
    async with sdk(keyed, "gw-wrong-key-000") as wrong:
        with pytest.raises(openai.AuthenticationError) as caught:
            await wrong.completions.create(model="small", prompt="x")

    assert missing.status == 401
    assert "Missing API key" in missing_body["error"]["message"]
    assert "gw-wrong-key-000" not in caught.value.message


async def test_key_not_allowed_a_deployment_is_403(keyed: TestServer, upstream: FakeUpstream) -> None:
    async with sdk(keyed, CI_KEY) as ci:
        with pytest.raises(openai.PermissionDeniedError):
            await ci.completions.create(model="large", prompt="x")
        allowed = await ci.completions.create(model="s", prompt="x")

    assert allowed.choices[0].text == "echo: x"
    assert len(upstream.received) == 1


@pytest.mark.parametrize(
    "headers",
    [
        {"x-gateway-api-key": TEAM_KEY},
        {"x-portkey-api-key": TEAM_KEY, "Authorization": "Bearer portkey-placeholder"},
        {"apikey": TEAM_KEY},
        {"Authorization": f"Bearer {TEAM_KEY}"},
    ],
    ids=["x-gateway-api-key", "x-portkey-api-key-beside-placeholder", "apikey", "bearer"],
)
async def test_every_key_header_is_accepted(keyed: TestServer, http: ClientSession, headers: dict[str, str]) -> None:
    async with http.post(
        keyed.make_url("/v1/completions"), json={"model": "small", "prompt": "x"}, headers=headers
    ) as r:
        assert r.status == 200


async def test_deployment_with_missing_secret_is_503_and_others_serve(keyed: TestServer) -> None:
    async with sdk(keyed, TEAM_KEY) as team:
        with pytest.raises(openai.APIStatusError) as caught:
            await team.completions.create(model="broken", prompt="x")
        fine = await team.completions.create(model="small", prompt="x")

    assert caught.value.status_code == 503
    assert "Deployment 'broken' cannot serve" in caught.value.message
    assert "Set UNSET_KEY" in caught.value.message  # what to set: the variable's name, never a value
    assert fine.choices[0].text == "echo: x"


async def test_health_is_always_ok(gateway: TestServer, http: ClientSession) -> None:
    async with http.get(gateway.make_url("/health")) as response:
        assert response.status == 200
        assert (await response.json())["status"] == "ok"


async def ready(http: ClientSession, gateway: TestServer) -> tuple[int, dict[str, Any]]:
    async with http.get(gateway.make_url("/ready")) as response:
        return response.status, await response.json()


async def test_ready_with_a_reachable_redis(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, redis_url: str
) -> None:
    gateway = await make_gateway({"redis": {"url": redis_url}, "deployments": [deployment("a", upstream.base_url)]})

    status, body = await once_redis_answers(http, str(gateway.make_url("/ready")))

    assert status == 200
    assert body["redis"] == "ok"
    assert body["deployments"] == {"a": {"state": "ready", "provider": "openai"}}


async def test_not_ready_when_redis_is_unreachable_and_the_limits_fail_closed(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {
        "redis": {"url": "redis://127.0.0.1:9/0"},
        "limits": {"on_redis_error": "closed"},
        "deployments": [deployment("a", upstream.base_url)],
    }
    gateway = await make_gateway(config)

    status, body = await ready(http, gateway)

    assert status == 503
    assert body["redis"] == "unreachable"


@pytest.mark.parametrize(("mode", "serving"), [("open", 200), ("closed", 503)])
async def test_a_redis_outage_leaves_ready_as_it_leaves_serving(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    redis_url: str,
    redis_prefix: str,
    mode: str,
    serving: int,
) -> None:
    """One Redis restart must not take every replica out of the Service when the operator chose to
    serve without Redis (`on_redis_error: open`): /ready says Redis is unreachable and stays 200
    exactly while a limited key's request is still served; with `closed` both answer 503."""
    proxy = await RedisProxy(redis_url).start()
    config = {
        # Long enough for a loaded machine's first ready check; once the proxy is gone, calls fail at once.
        "redis": {"url": proxy.url, "prefix": redis_prefix, "timeout_s": 5},
        "limits": {"on_redis_error": mode},
        "keys": [{"name": "team", "key": "${TEAM_KEY}", "limits": {"rpm": 100}, "budget": {"tokens": 10000}}],
        "deployments": [deployment("a", upstream.base_url, retries=0)],
    }
    gateway = await make_gateway(config, {"TEAM_KEY": TEAM_KEY})
    try:
        status, body = await once_redis_answers(http, str(gateway.make_url("/ready")))
        assert (status, body["redis"]) == (200, "ok")
        await proxy.stop()

        status, body = await ready(http, gateway)
        payload = {"model": "a", "prompt": "hi", "max_tokens": 2}
        headers = {"Authorization": f"Bearer {TEAM_KEY}"}
        async with http.post(gateway.make_url("/v1/completions"), json=payload, headers=headers) as response:
            served = response.status
    finally:
        await proxy.stop()

    assert body["redis"] == "unreachable"
    assert served == serving
    assert status == serving
    assert body["status"] == ("ready" if serving == 200 else "not ready")


async def test_not_ready_without_any_deployment_able_to_serve(
    make_gateway: GatewayFactory, http: ClientSession
) -> None:
    config = {"deployments": [deployment("a", "http://127.0.0.1:9/v1", provider={"api_key": "${UNSET}"})]}
    gateway = await make_gateway(config)

    status, body = await ready(http, gateway)

    assert status == 503
    assert body["deployments"]["a"]["state"] == "unavailable"
    assert "UNSET" in body["deployments"]["a"]["reason"]
