"""Bad transport input: each gets a clear error in the OpenAI envelope, and the gateway keeps serving."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream

GOOD = b'{"model": "fake", "prompt": "hi"}'


async def post(
    http: ClientSession, gateway: TestServer, body: bytes, content_type: str = "application/json"
) -> tuple[int, dict[str, Any]]:
    url = gateway.make_url("/v1/completions")
    async with http.post(url, data=body, headers={"Content-Type": content_type}) as response:
        return response.status, await response.json()


async def assert_still_serving(http: ClientSession, gateway: TestServer) -> None:
    status, body = await post(http, gateway, GOOD)
    assert status == 200
    assert body["choices"][0]["text"] == "echo: hi"


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        pytest.param(b'{"model": "fake", "prompt": ', "invalid_json", "not valid JSON", id="truncated-json"),
        pytest.param(b"{'model': 'fake'}", "invalid_json", "not valid JSON", id="single-quotes"),
        pytest.param(b"", "invalid_json", "empty", id="empty-body"),
        pytest.param(b'["fake", "hi"]', "invalid_json", "must be a JSON object, got a JSON array", id="array"),
        pytest.param(b'"hi"', "invalid_json", "got a JSON string", id="string"),
        pytest.param(b"null", "invalid_json", "got a JSON null", id="null"),
        pytest.param(b'{"model": "fake", "prompt": "\xff\xfe"}', "invalid_encoding", "not valid UTF-8", id="bad-utf8"),
    ],
)
async def test_malformed_body_is_a_400_that_says_why(
    http: ClientSession, gateway: TestServer, upstream: FakeUpstream, body: bytes, code: str, words: str
) -> None:
    status, error = await post(http, gateway, body)

    assert status == 400
    assert error["error"]["type"] == "invalid_request_error"
    assert error["error"]["code"] == code
    assert words in error["error"]["message"]
    assert upstream.received == []
    await assert_still_serving(http, gateway)


async def test_wrong_content_type_is_a_415(http: ClientSession, gateway: TestServer, upstream: FakeUpstream) -> None:
    status, error = await post(http, gateway, b"model=fake&prompt=hi", "application/x-www-form-urlencoded")

    assert status == 415
    assert "application/json" in error["error"]["message"]
    assert error["error"]["param"] == "Content-Type"
    assert upstream.received == []
    await assert_still_serving(http, gateway)


async def test_json_with_charset_is_accepted(http: ClientSession, gateway: TestServer) -> None:
    status, _ = await post(http, gateway, GOOD, "application/json; charset=utf-8")

    assert status == 200


async def test_body_over_the_limit_is_a_413(
    http: ClientSession, make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    config = {"server": {"max_body_bytes": 2048}, "deployments": [deployment("fake", upstream.base_url)]}
    gateway = await make_gateway(config)
    big = b'{"model": "fake", "prompt": "' + b"x" * 4096 + b'"}'

    status, error = await post(http, gateway, big)

    assert status == 413
    assert "2048" in error["error"]["message"]
    assert upstream.received == []
    await assert_still_serving(http, gateway)


async def test_wrong_method_is_a_405(http: ClientSession, gateway: TestServer) -> None:
    async with http.get(gateway.make_url("/v1/completions")) as response:
        body = await response.json()

    assert response.status == 405
    assert "POST" in response.headers["Allow"]
    assert "GET" in body["error"]["message"]
    await assert_still_serving(http, gateway)


async def test_unknown_path_is_a_404_in_the_envelope(http: ClientSession, gateway: TestServer) -> None:
    async with http.post(gateway.make_url("/v1/chat/completionz"), data=GOOD) as response:
        body = await response.json()

    assert response.status == 404
    assert "/v1/chat/completionz" in body["error"]["message"]
    assert response.headers["x-request-id"]
    await assert_still_serving(http, gateway)
