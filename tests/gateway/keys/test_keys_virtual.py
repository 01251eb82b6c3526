"""Virtual keys: encrypted at rest in a real Redis, resolved only for keys and providers that match,
and never echoed in an error or a log line."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr

from gateway.api.errors import GatewayError, InvalidRequest, PermissionDenied
from gateway.config.settings import VirtualKeyConfig
from gateway.keys.errors import EncryptionUnavailable, KeyStoreUnavailable
from gateway.keys.records import KeyRecord
from gateway.keys.vault import Vault, generate_encryption_key
from gateway.keys.virtual import VirtualKeys, presented_virtual_key
from gateway.keys.virtual_store import RedisVirtualKeyStore
from tests.support.redis_helpers import RedisProxy, redis_client

SECRET = "sk-ant-very-secret-credential-42"
CONFIG_SECRET = "sk-openai-config-credential-7"
TEAM = KeyRecord(name="team-a", sha256="a" * 64, virtual_keys=["anthropic-b", "openai-main", "ghost"])
STRANGER = KeyRecord(name="team-c", sha256="c" * 64)


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    async with redis_client(redis_url) as redis:
        yield redis


@pytest.fixture
def encryption_key() -> str:
    return generate_encryption_key()


@pytest.fixture
async def store(client: aioredis.Redis, redis_prefix: str, encryption_key: str) -> RedisVirtualKeyStore:
    store = RedisVirtualKeyStore(client, redis_prefix, Vault([encryption_key]))
    assert await store.create("anthropic-b", "anthropic", SECRET) is not None
    return store


def virtual_keys(store: RedisVirtualKeyStore | None) -> VirtualKeys:
    configured = [VirtualKeyConfig(name="openai-main", provider="openai", api_key=SecretStr(CONFIG_SECRET))]
    return VirtualKeys(configured, store)


async def test_credentials_in_redis_are_encrypted_at_rest(
    client: aioredis.Redis, redis_prefix: str, store: RedisVirtualKeyStore
) -> None:
    raw = b"".join([key + value async for key, value in client.hscan_iter(f"{redis_prefix}vkeys")])
    assert b"anthropic-b" in raw
    assert SECRET.encode() not in raw
    without_key = RedisVirtualKeyStore(client, redis_prefix, Vault([generate_encryption_key()]))
    with pytest.raises(EncryptionUnavailable) as refused:
        await without_key.credential("anthropic-b")
    assert SECRET not in refused.value.message


async def test_a_virtual_key_resolves_for_an_allowed_key_and_matching_provider(store: RedisVirtualKeyStore) -> None:
    resolver = virtual_keys(store)
    assert (await resolver.resolve(TEAM, "anthropic-b", "anthropic")).get_secret_value() == SECRET
    assert (await resolver.resolve(TEAM, "openai-main", "openai")).get_secret_value() == CONFIG_SECRET


@pytest.mark.parametrize(
    ("caller", "name", "provider", "error", "code"),
    [
        (
            KeyRecord(name="team-c", sha256="c" * 64),
            "anthropic-b",
            "anthropic",
            PermissionDenied,
            "virtual_key_not_allowed",
        ),
        (TEAM, "anthropic-b", "openai", InvalidRequest, "virtual_key_provider_mismatch"),
        (TEAM, "ghost", "openai", InvalidRequest, "unknown_virtual_key"),
    ],
)
async def test_refusals_never_carry_the_virtual_keys_value(
    store: RedisVirtualKeyStore,
    caller: KeyRecord,
    name: str,
    provider: str,
    error: type[GatewayError],
    code: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(error) as refused:
        await virtual_keys(store).resolve(caller, name, provider)
    assert refused.value.code == code
    assert refused.value.param == "x-gateway-virtual-key"
    # The client's text is quoted only once it names a virtual key that exists (and its provider
    # is the matter): until then the message names the header, never the header's value.
    assert (name in refused.value.message) == (code == "virtual_key_provider_mismatch")
    assert SECRET not in refused.value.body().decode()
    assert SECRET not in caplog.text


async def test_a_revoked_virtual_key_no_longer_resolves(store: RedisVirtualKeyStore) -> None:
    resolver = virtual_keys(store)
    await resolver.resolve(TEAM, "anthropic-b", "anthropic")
    await store.revoke("anthropic-b")
    resolver.forget("anthropic-b")
    with pytest.raises(InvalidRequest) as refused:
        await resolver.resolve(TEAM, "anthropic-b", "anthropic")
    assert refused.value.code == "unknown_virtual_key"


async def test_encryption_keys_rotate_without_losing_credentials(
    client: aioredis.Redis, redis_prefix: str, store: RedisVirtualKeyStore, encryption_key: str
) -> None:
    newest = generate_encryption_key()
    both = RedisVirtualKeyStore(client, redis_prefix, Vault([newest, encryption_key]))
    assert await both.reencrypt() == 1
    only_new = RedisVirtualKeyStore(client, redis_prefix, Vault([newest]))
    found = await only_new.credential("anthropic-b")
    assert found is not None
    assert found[1] == SECRET


async def test_without_an_encryption_key_nothing_is_stored(client: aioredis.Redis, redis_prefix: str) -> None:
    store = RedisVirtualKeyStore(client, redis_prefix, Vault.from_env({}))
    with pytest.raises(EncryptionUnavailable):
        await store.create("x", "openai", SECRET)
    assert await client.exists(f"{redis_prefix}vkeys") == 0
    with pytest.raises(ValueError, match="Fernet") as bad:
        Vault.from_env({"GATEWAY_ENCRYPTION_KEY": "not-a-key"})
    assert "not-a-key" not in str(bad.value)


async def test_redis_down_config_virtual_keys_still_resolve(
    caplog: pytest.LogCaptureFixture, redis_url: str, redis_prefix: str, encryption_key: str
) -> None:
    caplog.set_level(logging.DEBUG)
    proxy = await RedisProxy(redis_url).start()
    async with redis_client(proxy.url, socket_connect_timeout=0.2) as via_proxy:
        resolver = virtual_keys(RedisVirtualKeyStore(via_proxy, redis_prefix, Vault([encryption_key])))
        await proxy.stop()
        assert (await resolver.resolve(TEAM, "openai-main", "openai")).get_secret_value() == CONFIG_SECRET
        with pytest.raises(KeyStoreUnavailable):
            await resolver.resolve(TEAM, "anthropic-b", "anthropic")
    assert resolver.failures.errors == 1
    assert CONFIG_SECRET not in caplog.text


def test_the_virtual_key_headers() -> None:
    assert presented_virtual_key({"x-gateway-virtual-key": "a", "x-portkey-virtual-key": "b"}) == "a"
    assert presented_virtual_key({"x-portkey-virtual-key": " b "}) == "b"
    assert presented_virtual_key({}) is None


async def test_made_up_virtual_key_names_do_not_push_a_real_ones_last_view_out(
    redis_url: str, redis_prefix: str, encryption_key: str
) -> None:
    proxy = await RedisProxy(redis_url).start()
    async with redis_client(proxy.url, socket_connect_timeout=0.2) as via_proxy:
        store = RedisVirtualKeyStore(via_proxy, redis_prefix, Vault([encryption_key]))
        assert await store.create("anthropic-b", "anthropic", SECRET) is not None
        resolver = VirtualKeys([], store, cache_ttl_s=0)  # every lookup asks Redis
        anyone = KeyRecord(name="any", sha256="d" * 64, virtual_keys=["*"])
        assert (await resolver.resolve(anyone, "anthropic-b", "anthropic")).get_secret_value() == SECRET
        for index in range(10_050):  # past the bound of the cache
            with pytest.raises(InvalidRequest):
                await resolver.resolve(anyone, f"made-up-{index}", "anthropic")
        await proxy.stop()
        assert (await resolver.resolve(anyone, "anthropic-b", "anthropic")).get_secret_value() == SECRET
