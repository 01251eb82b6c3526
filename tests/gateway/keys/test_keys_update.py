"""`PATCH /admin/keys/NAME`: a key's limits, budget, deployments, expiry and metadata changed in
place, felt by its next requests through the gateway (real HTTP, real Redis)."""

from __future__ import annotations

from typing import Any

from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory
from tests.support.console_helpers import ADMIN_KEY, ENV, console_config

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


async def admin(http: ClientSession, gateway: TestServer, method: str, path: str, body: Any = None) -> Any:
    async with http.request(method, gateway.make_url(path), headers=ADMIN, json=body) as response:
        return response.status, await response.json()


async def complete(http: ClientSession, gateway: TestServer, key: str) -> int:
    body = {"model": "mock", "prompt": "hello", "max_tokens": 4}
    headers = {"Authorization": f"Bearer {key}"}
    async with http.post(gateway.make_url("/v1/completions"), json=body, headers=headers) as response:
        await response.read()
        return response.status


async def test_a_keys_limits_and_budget_change_in_place_and_bind_its_next_requests(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    gateway = await make_gateway(console_config(redis_settings), ENV)
    status, created = await admin(http, gateway, "POST", "/admin/keys", {"name": "tuned", "metadata": {"team": "a"}})
    assert status == 201
    key = created["key"]
    assert [await complete(http, gateway, key) for _ in range(3)] == [200, 200, 200]
    status, changed = await admin(http, gateway, "PATCH", "/admin/keys/tuned", {"limits": {"rpm": 1}})
    assert status == 200, changed
    assert changed["limits"]["rpm"] == 1
    assert changed["metadata"] == {"team": "a"}
    assert [await complete(http, gateway, key) for _ in range(2)] == [200, 429]
    budget = {"budget": {"tokens": 100, "period": "day"}, "limits": {}}
    status, changed = await admin(http, gateway, "PATCH", "/admin/keys/tuned", budget)
    assert status == 200
    assert changed["budget"]["tokens"] == 100
    assert changed["limits"]["rpm"] is None
    status, usage = await admin(http, gateway, "GET", "/admin/keys/tuned/usage")
    assert usage["budget"]["tokens"] == 100
    assert usage["period"] == "day"
    status, changed = await admin(http, gateway, "PATCH", "/admin/keys/tuned", {"budget": None})
    assert status == 200
    assert changed["budget"] is None
    status, changed = await admin(http, gateway, "PATCH", "/admin/keys/tuned", {"deployments": ["elsewhere"]})
    assert status == 200
    assert await complete(http, gateway, key) == 403  # the old value still authenticates; the mock is off limits


async def test_a_bad_change_is_a_400_naming_its_field_and_changes_nothing(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    gateway = await make_gateway(console_config(redis_settings), ENV)
    assert (await admin(http, gateway, "POST", "/admin/keys", {"name": "kept", "limits": {"rpm": 5}}))[0] == 201
    for body, param in [
        ({"limits": {"rpm": -1}}, "limits.rpm"),
        ({"expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
        ({"metadata": {"bad name!": "x"}}, "metadata"),
        ({"revoked": True}, "revoked"),
        ({"name": "renamed"}, "name"),
    ]:
        status, answer = await admin(http, gateway, "PATCH", "/admin/keys/kept", body)
        assert status == 400, (body, answer)
        assert answer["error"]["param"] == param
    status, record = await admin(http, gateway, "GET", "/admin/keys/kept")
    assert record["limits"]["rpm"] == 5
    assert record["status"] == "active"
    assert (await admin(http, gateway, "PATCH", "/admin/keys/nobody", {"limits": {}}))[0] == 404
