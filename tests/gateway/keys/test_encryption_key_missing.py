"""No GATEWAY_ENCRYPTION_KEY while virtual keys live in Redis: an operator's mistake, answered as
one (a 503 naming the setting, in the OpenAI envelope; a CLI line before anything is read; a
start-up warning), never a 500. Real gateway on loopback, real Redis."""

from __future__ import annotations

import io
from typing import Any

import pytest
import yaml
from aiohttp import ClientSession

from gateway import cli
from gateway.config.loader import parse_config
from gateway.keys.vault import Vault, generate_encryption_key
from gateway.keys.virtual_store import RedisVirtualKeyStore
from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream
from tests.support.redis_helpers import closed_port_url, redis_client

VARIABLE = "GATEWAY_ENCRYPTION_KEY"
ADMIN_KEY = "admin-key-0123456789abcdef-Zk4wPq8y"
TEAM_KEY = "team-key-0123456789abcdef"
PROVIDER_SECRET = "sk-canary-provider-secret-0123456789"
ENV = {"ADMIN_KEY": ADMIN_KEY, "TEAM_KEY": TEAM_KEY}


@pytest.fixture(autouse=True)
def no_encryption_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)  # the gateway reads it from its own environment


def config(upstream: FakeUpstream, redis: dict[str, str]) -> dict[str, Any]:
    return {
        "redis": redis,
        "admin": {"key": "${ADMIN_KEY}"},
        "keys": [{"name": "team", "key": "${TEAM_KEY}", "virtual_keys": ["stored"]}],
        "deployments": [deployment("fake", upstream.base_url, retries=0)],
    }


def assert_names_the_setting(body: dict[str, Any], status: int) -> None:
    assert status == 503, body
    error = body["error"]
    assert error["type"] == "service_unavailable"
    assert error["code"] == "encryption_key_missing"
    assert VARIABLE in error["message"]
    assert "gateway keys encryption-key" in error["message"]


async def test_creating_a_virtual_key_without_the_encryption_key_is_a_503_naming_it(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    redis_settings: dict[str, str],
    redis_url: str,
    redis_prefix: str,
) -> None:
    gateway = await make_gateway(config(upstream, redis_settings), ENV)
    body = {"name": "anthropic-b", "provider": "anthropic", "api_key": PROVIDER_SECRET}

    async with http.post(
        gateway.make_url("/admin/virtual-keys"), json=body, headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ) as response:
        text = await response.text()
        assert_names_the_setting(await response.json(), response.status)

    assert PROVIDER_SECRET not in text
    async with redis_client(redis_url) as client:
        assert await client.exists(f"{redis_prefix}vkeys") == 0  # nothing stored, encrypted or not


async def test_using_a_stored_virtual_key_without_the_encryption_key_is_a_503_naming_it(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    redis_settings: dict[str, str],
    redis_url: str,
    redis_prefix: str,
) -> None:
    async with redis_client(redis_url) as client:  # stored by a replica that has the key
        store = RedisVirtualKeyStore(client, redis_prefix, Vault([generate_encryption_key()]))
        assert await store.create("stored", "openai", PROVIDER_SECRET) is not None
    gateway = await make_gateway(config(upstream, redis_settings), ENV)
    headers = {"Authorization": f"Bearer {TEAM_KEY}", "x-gateway-virtual-key": "stored"}

    payload = {"model": "fake", "prompt": "hi", "max_tokens": 2}
    async with http.post(gateway.make_url("/v1/completions"), json=payload, headers=headers) as response:
        text = await response.text()
        assert_names_the_setting(await response.json(), response.status)

    assert PROVIDER_SECRET not in text
    assert upstream.received == []


def test_the_cli_names_the_missing_key_before_reading_the_credential_or_reaching_redis(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stdin = io.StringIO(PROVIDER_SECRET + "\n")
    monkeypatch.setattr("sys.stdin", stdin)
    for action in (["add-virtual", "openai-b", "--provider", "openai"], ["reencrypt"]):
        # Redis is unreachable here: the missing key is what is reported, not Redis.
        status = cli.main(["keys", "--redis-url", closed_port_url(), *action])

        assert status == 1
        [line] = capsys.readouterr().err.splitlines()
        assert VARIABLE in line
        assert "gateway keys encryption-key" in line
        assert "Redis" not in line
    assert stdin.tell() == 0  # the credential was never read


def test_start_up_warns_when_virtual_keys_in_redis_cannot_be_encrypted(redis_settings: dict[str, str]) -> None:
    upstream = FakeUpstream()
    upstream.base_url = "http://127.0.0.1:9/v1"
    text = yaml.safe_dump(config(upstream, redis_settings))

    warnings = parse_config(text, ENV).warnings
    [warning] = [w for w in warnings if VARIABLE in w]
    assert "'stored'" in warning
    assert parse_config(text, {**ENV, VARIABLE: generate_encryption_key()}).warnings == [
        w for w in warnings if VARIABLE not in w
    ]
    without_redis = yaml.safe_dump({**config(upstream, {}), "keys": [{"name": "team", "key": "${TEAM_KEY}"}]})
    assert not [w for w in parse_config(without_redis, ENV).warnings if VARIABLE in w]
