"""Every way an upstream fails maps to its status, in the envelope, with no credential in it."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory, deployment
from tests.support import fake_upstream as fake
from tests.support.fake_upstream import Behaviour, FakeUpstream

PROVIDER_KEY = "sk-live-provider-secret-0123456789abcdef"


def keyed_config(upstream: FakeUpstream, timeout_s: float) -> dict[str, Any]:
    """A deployment holding a provider credential, with no retries (so each scripted failure
    reaches the client)."""
    provider = {"api_key": "${PROVIDER_KEY}"}
    return {"deployments": [deployment("fake", upstream.base_url, timeout_s=timeout_s, retries=0, provider=provider)]}


@pytest.fixture
async def keyed_gateway(make_gateway: GatewayFactory, upstream: FakeUpstream) -> TestServer:
    """A timeout far past any answer of the fake's, on a loaded machine too: each failure is its own,
    never a timeout in its stead."""
    return await make_gateway(keyed_config(upstream, 30), {"PROVIDER_KEY": PROVIDER_KEY})


@pytest.fixture
async def hasty_gateway(make_gateway: GatewayFactory, upstream: FakeUpstream) -> TestServer:
    """A short timeout, for an upstream that stalls past it."""
    return await make_gateway(keyed_config(upstream, 0.5), {"PROVIDER_KEY": PROVIDER_KEY})


async def call(http: ClientSession, gateway: TestServer) -> tuple[int, dict[str, Any], dict[str, str]]:
    body = {"model": "fake", "prompt": "hi"}
    async with http.post(gateway.make_url("/v1/completions"), json=body) as response:
        return response.status, await response.json(), dict(response.headers)


@pytest.mark.parametrize(
    ("behaviour", "status", "code"),
    [
        pytest.param(fake.status(500), 502, "upstream_http_error", id="500"),
        pytest.param(fake.status(503), 502, "upstream_http_error", id="503"),
        pytest.param(fake.drop_connection(), 502, "upstream_unreachable", id="connection-dropped"),
        pytest.param(fake.truncated_json(), 502, "upstream_truncated", id="truncated-body"),
        pytest.param(fake.not_json(), 502, "upstream_malformed", id="not-json"),
    ],
)
async def test_upstream_failure_maps_to_its_status(
    http: ClientSession, keyed_gateway: TestServer, upstream: FakeUpstream, behaviour: Behaviour, status: int, code: str
) -> None:
    upstream.script(behaviour)

    got, body, headers = await call(http, keyed_gateway)

    assert got == status
    assert body["error"]["code"] == code
    assert "fake" in body["error"]["message"]  # names the deployment
    assert headers["x-gateway-deployment"] == "fake"
    assert headers["x-gateway-attempts"] == "1"


async def test_timeout_answers_without_waiting_for_the_upstream(
    http: ClientSession, hasty_gateway: TestServer, upstream: FakeUpstream
) -> None:
    upstream.script(fake.stall(120.0))

    async with asyncio.timeout(10):  # the 0.5 s timeout, not the upstream's 120 s (room for a loaded machine)
        status, body, headers = await call(http, hasty_gateway)

    assert status == 504
    assert body["error"]["code"] == "upstream_timeout"
    assert "fake" in body["error"]["message"]  # names the deployment
    assert headers["x-gateway-deployment"] == "fake"
    assert headers["x-gateway-attempts"] == "1"


async def test_unreachable_upstream_is_a_502(http: ClientSession, make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway({"deployments": [deployment("fake", "http://127.0.0.1:9/v1")]})

    status, body, _ = await call(http, gateway)

    assert status == 502
    assert body["error"]["code"] == "upstream_unreachable"
    # Where it looked, so an operator can act on it (never a credential: tests/gateway/routing/
    # test_deployment_availability.py).
    assert "deployment 'fake' at http://127.0.0.1:9/v1 could not be reached" in body["error"]["message"]


@pytest.mark.parametrize("code", [400, 401, 404, 422, 429])
async def test_upstream_4xx_passes_through_with_its_fields(
    http: ClientSession, keyed_gateway: TestServer, upstream: FakeUpstream, code: int
) -> None:
    error = {"message": "upstream says no", "type": "invalid_request_error", "param": "prompt", "code": "nope"}
    upstream.script(fake.status(code, error, headers={"Retry-After": "7"}))

    got, body, headers = await call(http, keyed_gateway)

    assert got == code
    assert body["error"] == error
    assert headers["Retry-After"] == "7"


async def test_upstream_error_quoting_the_credential_is_scrubbed(
    http: ClientSession, keyed_gateway: TestServer, upstream: FakeUpstream
) -> None:
    message = f"Incorrect API key provided: {PROVIDER_KEY}. Also sk-abc***********wxyz is wrong."
    upstream.script(fake.status(401, {"message": message, "type": "invalid_request_error"}))

    status, body, _ = await call(http, keyed_gateway)

    assert status == 401
    text = body["error"]["message"]
    assert PROVIDER_KEY not in text
    assert "sk-abc" not in text
    assert "[redacted]" in text


async def test_provider_credential_goes_upstream_but_never_to_the_client(
    http: ClientSession, keyed_gateway: TestServer, upstream: FakeUpstream
) -> None:
    url = keyed_gateway.make_url("/v1/completions")
    headers = {"Authorization": "Bearer client-side-token"}
    async with http.post(url, json={"model": "fake", "prompt": "hi"}, headers=headers) as response:
        raw = await response.read()
        response_headers = str(response.headers)

    assert upstream.received[0].headers["Authorization"] == f"Bearer {PROVIDER_KEY}"
    assert PROVIDER_KEY.encode() not in raw
    assert PROVIDER_KEY not in response_headers


async def test_sdk_sees_an_upstream_500_as_a_502_api_error(client: openai.AsyncOpenAI, upstream: FakeUpstream) -> None:
    upstream.script(fake.status(500))

    with pytest.raises(openai.APIStatusError) as caught:
        await client.completions.create(model="fake", prompt="hi")

    assert caught.value.status_code == 502
