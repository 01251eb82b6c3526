"""API keys, virtual keys, rate limits and budgets through the gateway itself: real HTTP on
loopback, a real Redis shared by two gateway instances, the `openai` SDK as a client."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory, deployment
from tests.support import fake_upstream as fake
from tests.support.fake_upstream import FakeUpstream

TEAM_KEY = "team-key-0123456789abcdef"
OTHER_KEY = "other-key-0123456789abcdef"
ADMIN_KEY = "admin-key-0123456789abcdef-Zk4wPq8y"
PROVIDER_SECRET = "sk-virtual-provider-secret-0123456789"
ENV = {"TEAM_KEY": TEAM_KEY, "OTHER_KEY": OTHER_KEY, "ADMIN_KEY": ADMIN_KEY, "VK_SECRET": PROVIDER_SECRET}
SECRETS = (TEAM_KEY, OTHER_KEY, ADMIN_KEY, PROVIDER_SECRET)


def config(upstream: FakeUpstream, *, redis: dict[str, str] | None = None, **team: Any) -> dict[str, Any]:
    return {
        "redis": redis or {},
        "admin": {"key": "${ADMIN_KEY}"},
        "keys": [
            {"name": "team", "key": "${TEAM_KEY}", "virtual_keys": ["openai-main"], **team},
            {"name": "other", "key": "${OTHER_KEY}", "deployments": ["other-only"]},
        ],
        "virtual_keys": [{"name": "openai-main", "provider": "openai", "api_key": "${VK_SECRET}"}],
        "deployments": [
            deployment("fake", upstream.base_url, retries=0),
            deployment("other-only", upstream.base_url, retries=0),
        ],
    }


async def post(
    http: ClientSession, gateway: TestServer, headers: dict[str, str], **body: Any
) -> tuple[int, dict[str, Any], dict[str, str]]:
    payload = {"model": "fake", "prompt": "hello there", "max_tokens": 5, **body}
    async with http.post(gateway.make_url("/v1/completions"), json=payload, headers=headers) as response:
        text = await response.text()
        parsed = await response.json(content_type=None) if not payload.get("stream") else {"text": text}
        return response.status, parsed, dict(response.headers)


async def team_usage(http: ClientSession, gateway: TestServer) -> dict[str, Any]:
    """The `team` key's spend this period, as the admin API reports it."""
    async with http.get(
        gateway.make_url("/admin/keys/team/usage"), headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ) as response:
        assert response.status == 200
        usage: dict[str, Any] = await response.json()
        return usage


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": f"Bearer {TEAM_KEY}"},
        {"x-gateway-api-key": TEAM_KEY},
        {"x-portkey-api-key": TEAM_KEY, "Authorization": "Bearer placeholder"},
        {"apikey": TEAM_KEY},
    ],
    ids=["bearer", "x-gateway-api-key", "x-portkey-api-key", "apikey"],
)
async def test_every_key_header_form_is_accepted(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, headers: dict[str, str]
) -> None:
    gateway = await make_gateway(config(upstream), ENV)
    status, body, _ = await post(http, gateway, headers)
    assert status == 200, body
    assert body["object"] == "text_completion"


async def test_missing_unknown_and_expired_keys_get_401_and_a_foreign_deployment_403(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await make_gateway(config(upstream, expires_at="2020-01-01T00:00:00Z"), ENV)
    missing = await post(http, gateway, {})
    unknown = await post(http, gateway, {"Authorization": "Bearer not-a-key"})
    expired = await post(http, gateway, {"Authorization": f"Bearer {TEAM_KEY}"})
    foreign = await post(http, gateway, {"Authorization": f"Bearer {OTHER_KEY}"})
    assert [r[0] for r in (missing, unknown, expired, foreign)] == [401, 401, 401, 403]
    assert missing[1]["error"]["code"] == "missing_api_key"
    assert expired[1]["error"]["code"] == "expired_api_key"
    assert "fake" in foreign[1]["error"]["message"]
    assert upstream.received == []


async def test_admin_api_creates_a_key_that_works_once_shown_and_revokes_it(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    redis_settings: dict[str, str],
) -> None:
    gateway = await make_gateway(config(upstream, redis=redis_settings), ENV)
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with http.post(gateway.make_url("/admin/keys"), json={"name": "new"}) as refused:
        assert refused.status == 401
    async with http.post(gateway.make_url("/admin/keys"), json={"name": "new"}, headers=admin) as created:
        assert created.status in (200, 201)
        value = (await created.json())["key"]
    async with http.get(gateway.make_url("/admin/keys/new"), headers=admin) as shown:
        assert value not in await shown.text()

    assert (await post(http, gateway, {"Authorization": f"Bearer {value}"}))[0] == 200
    async with http.post(gateway.make_url("/admin/keys/new/revoke"), headers=admin) as revoked:
        assert revoked.status == 200
    status, body, _ = await post(http, gateway, {"Authorization": f"Bearer {value}"})
    assert (status, body["error"]["code"]) == (401, "revoked_api_key")


async def test_two_gateways_sharing_redis_enforce_one_requests_per_minute_limit(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    redis_settings: dict[str, str],
) -> None:
    shared = config(upstream, redis=redis_settings, limits={"rpm": 4})
    first, second = await make_gateway(shared, ENV), await make_gateway(shared, ENV)
    key = {"Authorization": f"Bearer {TEAM_KEY}"}
    answers = [await post(http, gateway, key) for gateway in (first, second, first, second, first, second)]

    assert [status for status, _, _ in answers] == [200, 200, 200, 200, 429, 429]
    remaining = [headers["x-ratelimit-remaining-requests"] for _, _, headers in answers[:4]]
    assert remaining == ["3", "2", "1", "0"]
    assert answers[0][2]["x-ratelimit-limit-requests"] == "4"
    _, body, headers = answers[4]
    assert body["error"]["code"] == "rate_limit_exceeded"
    assert int(headers["Retry-After"]) >= 1
    assert len(upstream.received) == 4


async def test_the_sdk_sees_a_rate_limit_error(
    make_gateway: GatewayFactory, upstream: FakeUpstream, redis_settings: dict[str, str]
) -> None:
    gateway = await make_gateway(config(upstream, redis=redis_settings, limits={"rpm": 1}), ENV)
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key=TEAM_KEY, max_retries=0) as sdk:
        await sdk.completions.create(model="fake", prompt="one", max_tokens=5)
        with pytest.raises(openai.RateLimitError) as refused:
            await sdk.completions.create(model="fake", prompt="two", max_tokens=5)
    assert "team" in str(refused.value)


async def test_a_budget_crossed_by_concurrent_requests_is_overshot_by_at_most_those_in_flight(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    redis_settings: dict[str, str],
) -> None:
    # Each answer uses 5 prompt + 2 completion tokens ("echo: hi"); the estimate is 1 + 5 tokens.
    gateway = await make_gateway(
        config(upstream, redis=redis_settings, budget={"tokens": 30, "period": "1d"}),
        ENV,
    )
    key = {"Authorization": f"Bearer {TEAM_KEY}"}
    answers = await asyncio.gather(*(post(http, gateway, key, prompt="hi") for _ in range(12)))
    served = sum(1 for status, _, _ in answers if status == 200)
    refused = [body for status, body, _ in answers if status == 429]

    assert served + len(refused) == 12
    assert 1 <= served <= 5  # 30 tokens admit at most five 6-token estimates at once
    assert all(body["error"]["code"] == "budget_exceeded" for body in refused)
    assert (await team_usage(http, gateway))["tokens"] == served * 7  # every served call charged its real usage
    status, body, _ = await post(http, gateway, key, prompt="hi")
    assert (status, body["error"]["code"]) == (429, "budget_exceeded")
    assert "'team'" in body["error"]["message"]
    assert "other" not in body["error"]["message"]


async def test_a_stream_is_charged_its_real_usage(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    redis_settings: dict[str, str],
) -> None:
    gateway = await make_gateway(
        config(upstream, redis=redis_settings, budget={"tokens": 1000, "period": "1d"}),
        ENV,
    )
    key = {"Authorization": f"Bearer {TEAM_KEY}"}
    upstream.script(fake.stream(["one", " two", " three"]))
    status, body, _ = await post(
        http, gateway, key, prompt="hi", stream=True, stream_options={"include_usage": True}, max_tokens=500
    )
    assert status == 200
    assert "[DONE]" in body["text"]
    assert (await team_usage(http, gateway))["tokens"] == 5 + 3  # the upstream's own usage, not the 500-token estimate


async def test_a_virtual_key_credential_reaches_the_upstream_and_nowhere_else(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await make_gateway(config(upstream), ENV)
    key = {"Authorization": f"Bearer {TEAM_KEY}"}
    status, body, headers = await post(http, gateway, {**key, "x-gateway-virtual-key": "openai-main"})
    plain = await post(http, gateway, key)
    portkey_alias = await post(http, gateway, {**key, "x-portkey-virtual-key": "openai-main"})
    not_allowed = await post(
        http,
        gateway,
        {"Authorization": f"Bearer {OTHER_KEY}", "x-gateway-virtual-key": "openai-main"},
        model="other-only",
    )
    unknown = await post(http, gateway, {**key, "x-gateway-virtual-key": "nope"})

    assert [status, plain[0], portkey_alias[0]] == [200, 200, 200]
    sent = [r.headers.get("Authorization") for r in upstream.received]
    assert sent == [f"Bearer {PROVIDER_SECRET}", None, f"Bearer {PROVIDER_SECRET}"]
    assert (not_allowed[0], not_allowed[1]["error"]["code"]) == (403, "virtual_key_not_allowed")
    assert (unknown[0], unknown[1]["error"]["param"]) == (403, "x-gateway-virtual-key")  # not its to name
    for answer in (body, headers, not_allowed[1], unknown[1]):
        assert PROVIDER_SECRET not in str(answer)


async def test_no_secret_in_any_log_line_or_answer(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    redis_settings: dict[str, str],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.DEBUG)
    access_log = tmp_path / "access.jsonl"
    settings = config(upstream, redis=redis_settings, limits={"rpm": 2})
    settings["observability"] = {"access_log": {"path": str(access_log)}}
    gateway = await make_gateway(settings, ENV)
    answers = [
        await post(http, gateway, {"Authorization": f"Bearer {TEAM_KEY}", "x-gateway-virtual-key": "openai-main"}),
        await post(http, gateway, {"x-gateway-api-key": TEAM_KEY}),
        await post(http, gateway, {"apikey": TEAM_KEY}),  # rate limited
        await post(http, gateway, {"Authorization": f"Bearer {TEAM_KEY}x"}),  # unknown
        await post(http, gateway, {"Authorization": f"Bearer {OTHER_KEY}"}),  # forbidden
    ]
    async with http.post(
        gateway.make_url("/admin/keys"), json={"name": "made"}, headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ) as created:
        made = (await created.json())["key"]
    await post(http, gateway, {"Authorization": f"Bearer {made}"})

    assert [status for status, _, _ in answers] == [200, 200, 429, 401, 403]
    await gateway.close()  # the access log is written off the request path: flushed at shutdown
    logged = caplog.text + access_log.read_text()
    assert "team" in logged  # the log does describe the requests, by key name
    for secret in (*SECRETS, made):
        assert secret not in logged
        assert all(secret not in str(body) + str(headers) for _, body, headers in answers)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hello there"}]}),
        ("/v1/embeddings", {"input": ["hello there", "again"]}),
        ("/v1/messages", {"max_tokens": 5, "messages": [{"role": "user", "content": "hello there"}]}),
        ("/v1/responses", {"input": "hello there"}),
    ],
)
async def test_a_virtual_key_credential_reaches_every_api_s_upstream(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, path: str, body: dict[str, Any]
) -> None:
    gateway = await make_gateway(config(upstream), ENV)
    key = {"Authorization": f"Bearer {TEAM_KEY}"}

    async def call(headers: dict[str, str]) -> tuple[int, str]:
        async with http.post(gateway.make_url(path), json={"model": "fake", **body}, headers=headers) as response:
            return response.status, await response.text()

    with_virtual = await call({**key, "x-gateway-virtual-key": "openai-main"})
    not_allowed = await call({"Authorization": f"Bearer {OTHER_KEY}", "x-gateway-virtual-key": "openai-main"})

    assert with_virtual[0] == 200
    assert [r.headers.get("Authorization") for r in upstream.received] == [f"Bearer {PROVIDER_SECRET}"]
    assert not_allowed[0] == 403
    assert PROVIDER_SECRET not in with_virtual[1] + not_allowed[1]
