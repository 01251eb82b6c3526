"""The access log: one line per request, with where it went and the request's labels, never a secret."""

from __future__ import annotations

import logging

import pytest
from aiohttp import ClientSession

from tests.conftest import GatewayFactory, deployment
from tests.fake_upstream import FakeUpstream

CLIENT_KEY = "gw-client-key-0123456789abcdef"


async def test_a_named_deployment_keeps_the_tags_as_labels(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    config = {
        "keys": [{"name": "team-a", "key": "${CLIENT_KEY}"}],
        "deployments": [deployment("fake", upstream.base_url, tags=["blue"]), deployment("other", upstream.base_url)],
    }
    gateway = await make_gateway(config, {"CLIENT_KEY": CLIENT_KEY})
    headers = {
        "Authorization": f"Bearer {CLIENT_KEY}",
        "x-gateway-deployment": "other",
        "x-gateway-tags": "blue, team:search status=500",
        "x-request-id": "trace-42",
    }

    with caplog.at_level(logging.INFO, logger="gateway.access"):
        async with http.post(
            gateway.make_url("/v1/completions"), json={"model": "x", "prompt": "hi"}, headers=headers
        ) as response:
            assert response.status == 200
            assert response.headers["x-gateway-deployment"] == "other"  # the name decided, not the tags

    [line] = [record.getMessage() for record in caplog.records if record.name == "gateway.access"]
    assert "request_id=trace-42" in line
    assert "status=200" in line
    assert "status=500" not in line
    assert "deployment=other" in line
    assert "attempts=1" in line
    assert "key=team-a" in line
    assert "tags=blue,team:search_status_500" in line  # a header cannot forge a field
    assert CLIENT_KEY not in caplog.text


async def test_a_failed_request_is_logged_with_its_status(
    make_gateway: GatewayFactory, http: ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = await make_gateway({"deployments": [deployment("down", "http://127.0.0.1:9/v1", retries=0)]})

    with caplog.at_level(logging.INFO, logger="gateway.access"):
        async with http.post(gateway.make_url("/v1/completions"), json={"model": "down", "prompt": "hi"}) as response:
            assert response.status == 502

    [line] = [record.getMessage() for record in caplog.records if record.name == "gateway.access"]
    assert "status=502" in line
    assert "deployment=down" in line
    assert "attempts=1" in line
