"""The admin API over HTTP (aiohttp's test client) against a real Redis."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from aiohttp.test_utils import TestClient
from pydantic import SecretStr
from pytest_aiohttp import AiohttpClient

from gateway.api.errors import AuthenticationFailed, GatewayError
from gateway.config.settings import VirtualKeyConfig
from gateway.keys.admin import AdminServices, admin_app
from gateway.keys.directory import KeyDirectory
from gateway.keys.records import records_from_config
from gateway.keys.store import RedisKeyStore
from gateway.keys.vault import Vault, generate_encryption_key
from gateway.keys.virtual import VirtualKeys
from gateway.keys.virtual_store import RedisVirtualKeyStore
from policies.limits import BudgetSpec, Caller, Estimate, redis_limits
from tests.gateway.keys.test_keys_auth import CONFIG_KEY, config_keys
from tests.support.redis_helpers import redis_client

ADMIN_KEY = "admin-secret-0123456789-Qx7vLm2pRt"
ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}
PROVIDER_SECRET = "sk-upstream-provider-secret-xyz"


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    async with redis_client(redis_url) as redis:
        yield redis


@pytest.fixture
def services(client: aioredis.Redis, redis_prefix: str) -> AdminServices:
    keys = KeyDirectory(records_from_config(config_keys()), RedisKeyStore(client, redis_prefix))
    vault = Vault([generate_encryption_key()])
    configured = [VirtualKeyConfig(name="openai-main", provider="openai", api_key=SecretStr("sk-config-provider"))]
    virtual = VirtualKeys(configured, RedisVirtualKeyStore(client, redis_prefix, vault))
    return AdminServices(keys=keys, virtual_keys=virtual, limits=redis_limits(client, redis_prefix))


@pytest.fixture
async def admin(services: AdminServices, aiohttp_client: AiohttpClient) -> TestClient[Any, Any]:
    root = web.Application()
    sub = admin_app(services, SecretStr(ADMIN_KEY))
    assert sub is not None
    root.add_subapp("/admin", sub)
    return await aiohttp_client(root)


async def test_the_admin_api_refuses_without_the_admin_key(admin: TestClient[Any, Any]) -> None:
    for headers, code in [({}, "missing_admin_key"), ({"x-gateway-admin-key": "wrong"}, "invalid_admin_key")]:
        for method, path in [("GET", "/admin/keys"), ("POST", "/admin/keys"), ("DELETE", "/admin/keys/team-a")]:
            response = await admin.request(method, path, headers=headers, json={"name": "x"})
            assert response.status == 401
            assert (await response.json())["error"]["code"] == code
    response = await admin.get("/admin/keys", headers={"authorization": f"Bearer {CONFIG_KEY}"})  # a client key
    assert response.status == 401


def test_without_an_admin_key_the_admin_api_is_off(services: AdminServices) -> None:
    assert admin_app(services, None) is None
    assert admin_app(services, SecretStr("")) is None


async def test_a_new_keys_value_is_shown_once_and_never_its_hash(
    admin: TestClient[Any, Any], services: AdminServices
) -> None:
    body = {"name": "team-b", "deployments": ["tag:fast"], "limits": {"rpm": 60}, "metadata": {"team": "b"}}
    created = await admin.post("/admin/keys", headers=ADMIN, json=body)
    assert created.status == 201
    payload = await created.json()
    value = payload["key"]
    record = await services.keys.authenticate({"x-gateway-api-key": value})
    assert record.limits.rpm == 60
    listed = await (await admin.get("/admin/keys", headers=ADMIN)).text()
    shown = await (await admin.get("/admin/keys/team-b", headers=ADMIN)).text()
    for text in (listed, shown, str(payload["record"])):
        assert value not in text
        assert record.sha256 not in text
    assert '"team-a"' in listed  # the config keys are listed too
    assert '"team-b"' in listed
    again = await admin.post("/admin/keys", headers=ADMIN, json=body)
    assert again.status == 409


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        ({"team": "a\nforged=line"}, "control characters"),
        ({"team": "a\u001b[31m"}, "control characters"),
        ({"team": "x" * 257}, "longer than 256 characters"),
        ({f"field{i}": "v" for i in range(17)}, "at most 16 fields"),
        ({"team name": "v"}, "A-Za-z0-9_.-"),
    ],
    ids=["newline", "escape", "long-value", "many-fields", "bad-name"],
)
async def test_metadata_given_to_a_new_key_is_bounded_and_refuses_control_characters(
    admin: TestClient[Any, Any], services: AdminServices, metadata: dict[str, str], problem: str
) -> None:
    created = await admin.post("/admin/keys", headers=ADMIN, json={"name": "team-m", "metadata": metadata})
    assert created.status == 400
    error = (await created.json())["error"]
    assert error["param"] == "metadata"
    assert problem in error["message"]
    assert await services.keys.get("team-m") is None


async def test_rotate_and_revoke_take_effect_on_the_next_authentication(
    admin: TestClient[Any, Any], services: AdminServices
) -> None:
    value = (await (await admin.post("/admin/keys", headers=ADMIN, json={"name": "team-b"})).json())["key"]
    rotated = await admin.post("/admin/keys/team-b/rotate", headers=ADMIN)
    new_value = (await rotated.json())["key"]
    with pytest.raises(AuthenticationFailed):
        await services.keys.authenticate({"apikey": value})
    assert (await services.keys.authenticate({"apikey": new_value})).name == "team-b"
    revoked = await admin.delete("/admin/keys/team-b", headers=ADMIN)
    assert (await revoked.json())["revoked"] is True
    with pytest.raises(AuthenticationFailed) as refused:
        await services.keys.authenticate({"apikey": new_value})
    assert refused.value.code == "revoked_api_key"


async def test_config_keys_cannot_be_changed_through_the_api(admin: TestClient[Any, Any]) -> None:
    response = await admin.post("/admin/keys/team-a/revoke", headers=ADMIN)
    assert response.status == 400
    assert (await response.json())["error"]["code"] == "key_store_read_only"
    missing = await admin.post("/admin/keys/nobody/rotate", headers=ADMIN)
    assert missing.status == 404


async def test_a_bad_body_names_the_field(admin: TestClient[Any, Any]) -> None:
    response = await admin.post("/admin/keys", headers=ADMIN, json={"name": "b", "limits": {"rpm": -1}})
    assert response.status == 400
    assert (await response.json())["error"]["param"] == "limits.rpm"
    response = await admin.post("/admin/keys", headers=ADMIN, data=b"{not json")
    assert response.status == 400


async def test_usage_per_key_is_readable(admin: TestClient[Any, Any], services: AdminServices) -> None:
    await admin.post("/admin/keys", headers=ADMIN, json={"name": "team-b", "budget": {"tokens": 1000, "period": "1d"}})
    assert services.limits is not None
    caller = Caller(key="team-b", deployment="instruct", budget=BudgetSpec(tokens=1000, period="1d"))
    admission = await services.limits.admit(caller, Estimate(10, 10))
    await services.limits.settle(admission, prompt_tokens=12, completion_tokens=30)
    usage = await (await admin.get("/admin/keys/team-b/usage", headers=ADMIN)).json()
    assert usage["tokens"] == 42
    assert usage["budget"]["tokens"] == 1000
    assert usage["period"] == "1d"


async def test_virtual_keys_are_managed_without_ever_showing_their_value(
    admin: TestClient[Any, Any], services: AdminServices, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    body = {"name": "anthropic-b", "provider": "anthropic", "api_key": PROVIDER_SECRET}
    created = await admin.post("/admin/virtual-keys", headers=ADMIN, json=body)
    assert created.status == 201
    texts = [await created.text()]
    texts.append(await (await admin.get("/admin/virtual-keys", headers=ADMIN)).text())
    texts.append(await (await admin.get("/admin/virtual-keys/anthropic-b", headers=ADMIN)).text())
    rotate = await admin.post("/admin/virtual-keys/anthropic-b/rotate", headers=ADMIN, json={"api_key": "sk-new-1"})
    texts.append(await rotate.text())
    bad = await admin.post("/admin/virtual-keys", headers=ADMIN, json={**body, "name": "bad name!"})
    texts.append(await bad.text())
    assert bad.status == 400
    for text in texts:
        assert PROVIDER_SECRET not in text
        assert "sk-new-1" not in text
        assert "sk-config-provider" not in text
    assert '"openai-main"' in texts[1]
    assert PROVIDER_SECRET not in caplog.text
    revoked = await admin.delete("/admin/virtual-keys/anthropic-b", headers=ADMIN)
    assert (await revoked.json())["revoked"] is True
    assert services.virtual_keys.redis is not None
    assert await services.virtual_keys.redis.credential("anthropic-b") is not None
    found = await services.virtual_keys.redis.credential("anthropic-b")
    assert found is not None
    assert found[1] is None  # the value is gone with the revoke


async def test_secrets_are_absent_from_every_log_line_and_error(
    admin: TestClient[Any, Any], services: AdminServices, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    created = await (
        await admin.post("/admin/keys", headers=ADMIN, json={"name": "team-b", "limits": {"rpm": 1}})
    ).json()
    value = created["key"]
    record = await services.keys.authenticate({"authorization": f"Bearer {value}"})
    errors: list[str] = []
    for headers in ({"apikey": value + "x"}, {"x-gateway-api-key": "gw-guess"}):
        with pytest.raises(AuthenticationFailed) as refused:
            await services.keys.authenticate(headers)
        errors.append(refused.value.body().decode())
    assert services.limits is not None
    caller = Caller(key="team-b", deployment="instruct", key_limits=record.limits)
    await services.limits.admit(caller, Estimate(1, 1))
    with pytest.raises(GatewayError) as limited:
        await services.limits.admit(caller, Estimate(1, 1))
    errors.append(limited.value.body().decode() + str(limited.value.headers))
    await admin.post("/admin/keys/team-b/revoke", headers=ADMIN)
    with pytest.raises(AuthenticationFailed) as revoked:
        await services.keys.authenticate({"apikey": value})
    errors.append(revoked.value.body().decode())
    errors.append(await (await admin.get("/admin/keys", headers={"x-gateway-admin-key": ADMIN_KEY + "!"})).text())
    for secret in (value, record.sha256, ADMIN_KEY, CONFIG_KEY):
        assert secret not in caplog.text
        assert all(secret not in error for error in errors)
