"""Choosing a deployment, renaming the model, and the gateway's response headers."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from multidict import CIMultiDict

from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream


@pytest.fixture
async def two_deployments(make_gateway: GatewayFactory, upstream: FakeUpstream) -> TestServer:
    config = {
        "deployments": [
            deployment("small", upstream.base_url, aliases=["gpt-3.5-turbo-instruct"], provider={"model": "up-small"}),
            deployment("large", upstream.base_url, provider={"model": "up-large", "headers": {"x-team": "blue"}}),
        ]
    }
    return await make_gateway(config)


async def post(
    http: ClientSession,
    gateway: TestServer,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
    path: str = "/v1/completions",
) -> tuple[int, dict[str, Any], CIMultiDict[str]]:
    async with http.post(gateway.make_url(path), json=body, headers=headers or {}) as response:
        return response.status, await response.json(), response.headers.copy()


@pytest.mark.parametrize("header", ["x-gateway-deployment", "X-Enkrypt-Deployment"])
async def test_deployment_header_wins_over_the_body_model(
    http: ClientSession, two_deployments: TestServer, upstream: FakeUpstream, header: str
) -> None:
    status, _, headers = await post(http, two_deployments, {"model": "small", "prompt": "x"}, {header: "large"})

    assert status == 200
    assert headers["x-gateway-deployment"] == "large"
    assert upstream.received[0].body["model"] == "up-large"


async def test_unknown_deployment_header_is_a_404_naming_the_header(
    http: ClientSession, two_deployments: TestServer
) -> None:
    status, body, _ = await post(
        http, two_deployments, {"model": "small", "prompt": "x"}, {"x-gateway-deployment": "huge"}
    )

    assert status == 404
    assert body["error"]["code"] == "deployment_not_found"
    assert body["error"]["param"] == "x-gateway-deployment"
    assert "x-gateway-deployment" in body["error"]["message"]
    assert "huge" not in body["error"]["message"]  # no header's value is ever quoted back


async def test_body_model_alias_picks_its_deployment_and_model_is_renamed(
    http: ClientSession, two_deployments: TestServer, upstream: FakeUpstream
) -> None:
    status, _, headers = await post(http, two_deployments, {"model": "gpt-3.5-turbo-instruct", "prompt": "x"})

    assert status == 200
    assert headers["x-gateway-deployment"] == "small"
    assert upstream.received[0].body["model"] == "up-small"


async def test_extra_headers_reach_the_upstream_and_client_auth_does_not(
    http: ClientSession, two_deployments: TestServer, upstream: FakeUpstream
) -> None:
    await post(http, two_deployments, {"model": "large", "prompt": "x"}, {"Authorization": "Bearer client-key"})

    sent = upstream.received[0].headers
    assert sent["x-team"] == "blue"
    assert "Authorization" not in sent


@pytest.mark.parametrize("path", ["/v1/completions", "/completions", "/ai-proxy/completions"])
async def test_every_completions_path_serves(http: ClientSession, gateway: TestServer, path: str) -> None:
    status, body, _ = await post(http, gateway, {"model": "fake", "prompt": "p"}, path=path)

    assert status == 200
    assert body["choices"][0]["text"] == "echo: p"


async def test_client_request_id_is_echoed_and_forwarded(
    http: ClientSession, gateway: TestServer, upstream: FakeUpstream
) -> None:
    _, _, headers = await post(http, gateway, {"model": "fake", "prompt": "p"}, {"x-request-id": "trace-42"})

    assert headers["x-request-id"] == "trace-42"
    assert upstream.received[0].headers["x-request-id"] == "trace-42"


async def test_request_id_is_generated_when_absent_or_unsafe(http: ClientSession, gateway: TestServer) -> None:
    _, _, first = await post(http, gateway, {"model": "fake", "prompt": "p"})
    _, _, second = await post(http, gateway, {"model": "fake", "prompt": "p"}, {"x-request-id": "bad id\twith spaces"})

    assert first["x-request-id"].startswith("req_")
    assert second["x-request-id"].startswith("req_")
    assert first["x-request-id"] != second["x-request-id"]


async def test_errors_carry_the_request_id_too(http: ClientSession, gateway: TestServer) -> None:
    status, _, headers = await post(http, gateway, {"model": "fake"}, {"x-request-id": "err-1"})

    assert status == 400
    assert headers["x-request-id"] == "err-1"


@pytest.mark.parametrize("stream", [False, True])
async def test_gateway_headers_on_answers(http: ClientSession, gateway: TestServer, stream: bool) -> None:
    async with http.post(
        gateway.make_url("/v1/completions"), json={"model": "fake", "prompt": "p", "stream": stream}
    ) as response:
        await response.read()
        headers = response.headers

    assert headers["x-gateway-deployment"] == "fake"
    assert headers["x-gateway-provider"] == "openai"
    assert 0 <= float(headers["x-gateway-overhead-ms"]) < 1000
    assert headers["x-request-id"]
