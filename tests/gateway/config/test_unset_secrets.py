"""A config that names a secret whose environment variable is unset: the gateway starts, and what the
secret guards stays shut (never open because a variable was forgotten)."""

from __future__ import annotations

from typing import Any

from aiohttp import ClientSession

from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream


async def get(http: ClientSession, url: Any, **headers: str) -> tuple[int, dict[str, Any]]:
    async with http.get(url, headers=headers) as response:
        return response.status, await response.json(content_type=None) if response.status != 200 else {}


async def test_metrics_without_a_key_are_open(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await make_gateway({"deployments": [deployment("fake", upstream.base_url)]})

    assert (await get(http, gateway.make_url("/metrics")))[0] == 200


async def test_metrics_whose_key_variable_is_unset_refuse_every_scrape(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {
        "deployments": [deployment("fake", upstream.base_url)],
        "observability": {"metrics": {"key": "${METRICS_KEY}"}},
    }
    gateway = await make_gateway(config, {})

    for path in ("/metrics", "/dashboard/data"):
        for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": "Bearer anything"}):
            status, body = await get(http, gateway.make_url(path), **headers)
            assert status == 401
            assert body["error"]["code"] == "metrics_key_unset"
            assert body["error"]["type"] == "authentication_error"
    async with http.get(gateway.make_url("/dashboard")) as page:
        assert page.status == 200  # the page holds no data; it asks for the key


async def test_a_wrong_metrics_key_is_refused_in_the_error_envelope(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {
        "deployments": [deployment("fake", upstream.base_url)],
        "observability": {"metrics": {"key": "${METRICS_KEY}"}},
    }
    gateway = await make_gateway(config, {"METRICS_KEY": "metrics-token-0123456789"})

    status, body = await get(http, gateway.make_url("/metrics"), Authorization="Bearer wrong")

    assert status == 401
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["code"] == "invalid_metrics_key"
    assert (await get(http, gateway.make_url("/metrics"), Authorization="Bearer metrics-token-0123456789"))[0] == 200


async def test_an_unset_admin_key_turns_the_admin_api_off_and_leaves_callers_needing_a_key(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {"admin": {"key": "${ADMIN_KEY}"}, "deployments": [deployment("fake", upstream.base_url)]}
    gateway = await make_gateway(config, {})

    status, body = await get(http, gateway.make_url("/v1/models"))
    assert status == 401
    assert body["error"]["code"] == "missing_api_key"
    assert (await get(http, gateway.make_url("/admin/keys"), Authorization="Bearer "))[0] == 404
