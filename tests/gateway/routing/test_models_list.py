"""GET /v1/models lists each model id once: a group's shared alias appears once, not once per member."""

from __future__ import annotations

from collections import Counter

from aiohttp import ClientSession

from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream


async def test_each_model_id_is_listed_once(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    members = [deployment(name, upstream.base_url, aliases=["group", f"{name}-alias"]) for name in ("a", "b", "c")]
    gateway = await make_gateway({"deployments": members})

    async with http.get(gateway.make_url("/v1/models")) as response:
        listed = (await response.json())["data"]

    ids = [model["id"] for model in listed]
    assert Counter(ids) == Counter(["a", "b", "c", "a-alias", "b-alias", "c-alias", "group"])
    assert next(model for model in listed if model["id"] == "group")["deployment"] == "a"  # its first member
