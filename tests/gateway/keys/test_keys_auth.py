"""Authenticating gateway API keys from config.yaml and from a real Redis: every header form, and
the 401s and 403s a caller sees."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr

from gateway.api.credentials import hash_key
from gateway.api.errors import AuthenticationFailed, PermissionDenied
from gateway.config.key_policy import KeyPolicy
from gateway.config.settings import ClientKeyConfig
from gateway.keys.directory import KeyDirectory, authorize
from gateway.keys.errors import KeyStoreUnavailable
from gateway.keys.records import KEY_PREFIX, records_from_config
from gateway.keys.store import RedisKeyStore
from tests.support.redis_helpers import RedisProxy, closed_port_url, redis_client

CONFIG_KEY = "sk-config-team-a-0123456789"


class ConfiguredKey(ClientKeyConfig, KeyPolicy):
    """A `keys:` entry as it reads once `gateway.config.settings.ClientKeyConfig` gains the policy fields."""


def config_keys() -> list[ConfiguredKey]:
    return [
        ConfiguredKey(name="team-a", key=SecretStr(CONFIG_KEY), deployments=["instruct", "tag:fast"]),
        ConfiguredKey(name="old", sha256=hash_key("sk-old"), expires_at=datetime(2020, 1, 1, tzinfo=UTC)),
        ConfiguredKey(name="gone", sha256=hash_key("sk-gone"), revoked=True),
    ]


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    async with redis_client(redis_url) as redis:
        yield redis


@pytest.fixture
def directory(client: aioredis.Redis, redis_prefix: str) -> KeyDirectory:
    return KeyDirectory(records_from_config(config_keys()), RedisKeyStore(client, redis_prefix))


@pytest.mark.parametrize(
    "headers",
    [
        {"authorization": f"Bearer {CONFIG_KEY}"},
        {"x-gateway-api-key": CONFIG_KEY},
        {"x-portkey-api-key": CONFIG_KEY},
        {"apikey": CONFIG_KEY},
        {"authorization": "Bearer portkey-placeholder", "x-portkey-api-key": CONFIG_KEY},  # the most specific wins
    ],
)
async def test_every_header_form_authenticates(directory: KeyDirectory, headers: dict[str, str]) -> None:
    assert (await directory.authenticate(headers)).name == "team-a"


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({}, "missing_api_key"),
        ({"authorization": "Basic abc"}, "missing_api_key"),
        ({"x-gateway-api-key": "sk-nobody"}, "invalid_api_key"),
        ({"x-gateway-api-key": "sk-old"}, "expired_api_key"),
        ({"x-gateway-api-key": "sk-gone"}, "revoked_api_key"),
    ],
)
async def test_missing_unknown_expired_and_revoked_keys_get_401(
    directory: KeyDirectory, headers: dict[str, str], code: str
) -> None:
    with pytest.raises(AuthenticationFailed) as refused:
        await directory.authenticate(headers)
    assert refused.value.status == 401
    assert refused.value.code == code
    for value in headers.values():
        assert value.removeprefix("Bearer ").removeprefix("Basic ") not in refused.value.body().decode()


async def test_a_key_created_in_redis_authenticates_and_expires(client: aioredis.Redis, redis_prefix: str) -> None:
    now = [datetime.now(UTC)]  # the directory's clock, moved by hand: a slow machine takes no time off the key
    directory = KeyDirectory([], RedisKeyStore(client, redis_prefix), clock=lambda: now[0])
    soon = now[0] + timedelta(seconds=0.3)
    value, record = await directory.create("team-b", {"deployments": ["*"], "expires_at": soon})
    assert value.startswith(KEY_PREFIX)
    assert record.sha256 == hash_key(value)
    assert (await directory.authenticate({"x-gateway-api-key": value})).name == "team-b"
    now[0] += timedelta(seconds=0.35)
    with pytest.raises(AuthenticationFailed) as refused:
        await directory.authenticate({"x-gateway-api-key": value})
    assert refused.value.code == "expired_api_key"


async def test_a_revoke_reaches_other_replicas_within_the_cache_ttl(
    client: aioredis.Redis, redis_prefix: str, directory: KeyDirectory
) -> None:
    clock = [0.0]  # the replica's cache clock, moved by hand: the bound is 0.3 s however slow the machine
    replica = KeyDirectory([], RedisKeyStore(client, redis_prefix, cache_ttl_s=0.3, clock=lambda: clock[0]))
    value, _ = await directory.create("team-b", {})
    assert (await replica.authenticate({"apikey": value})).name == "team-b"  # now in the replica's cache
    await directory.revoke("team-b")
    with pytest.raises(AuthenticationFailed):
        await directory.authenticate({"apikey": value})  # the revoking process knows at once
    assert (await replica.authenticate({"apikey": value})).name == "team-b"  # the documented bound
    clock[0] = 0.35
    with pytest.raises(AuthenticationFailed) as refused:
        await replica.authenticate({"apikey": value})
    assert refused.value.code == "revoked_api_key"


async def test_a_rotated_key_stops_working_and_the_new_value_works(directory: KeyDirectory) -> None:
    old, _ = await directory.create("team-b", {"metadata": {"owner": "b@example.com"}})
    rotated = await directory.rotate("team-b")
    assert rotated is not None
    new, record = rotated
    assert new != old
    assert record.metadata == {"owner": "b@example.com"}
    assert (await directory.authenticate({"apikey": new})).name == "team-b"
    with pytest.raises(AuthenticationFailed):
        await directory.authenticate({"apikey": old})


async def test_config_keys_authenticate_while_redis_is_down() -> None:
    async with redis_client(closed_port_url(), socket_connect_timeout=0.2) as dead:
        directory = KeyDirectory(records_from_config(config_keys()), RedisKeyStore(dead, "test:"))
        assert (await directory.authenticate({"apikey": CONFIG_KEY})).name == "team-a"
        with pytest.raises(KeyStoreUnavailable) as unavailable:
            await directory.authenticate({"apikey": "gw-a-key-only-redis-could-know"})
    assert unavailable.value.status == 503
    assert directory.redis is not None
    assert directory.redis.failures.errors == 1


async def test_a_redis_key_seen_before_keeps_working_while_redis_is_down(
    client: aioredis.Redis, redis_prefix: str, redis_url: str
) -> None:
    clock = [0.0]
    value, _ = await KeyDirectory([], RedisKeyStore(client, redis_prefix)).create("team-b", {})
    proxy = await RedisProxy(redis_url).start()
    async with redis_client(proxy.url, socket_connect_timeout=0.2, socket_timeout=0.2) as own:
        store = RedisKeyStore(own, redis_prefix, cache_ttl_s=1.0, clock=lambda: clock[0])
        directory = KeyDirectory([], store)
        assert (await directory.authenticate({"apikey": value})).name == "team-b"
        await proxy.stop()
        clock[0] = 5.0  # its cache entry is stale: it asks Redis, which is gone
        assert (await directory.authenticate({"apikey": value})).name == "team-b"
        with pytest.raises(KeyStoreUnavailable):
            await directory.authenticate({"apikey": "gw-never-seen-here"})
    assert store.failures.errors == 2


async def test_a_key_may_use_only_its_deployments() -> None:
    [team] = records_from_config(config_keys()[:1])
    authorize(team, "instruct")
    authorize(team, "other", tags=["fast", "cheap"])  # by tag
    with pytest.raises(PermissionDenied) as refused:
        authorize(team, "secret-model", tags=["slow"])
    assert refused.value.status == 403
    assert "team-a" in refused.value.message


async def test_with_no_keys_anywhere_the_gateway_is_open() -> None:
    directory = KeyDirectory([])
    caller = await directory.authenticate({})
    assert caller.may_use("anything")
    assert caller.may_use_virtual_key("anything")
