"""`gateway keys …` against a real Redis: values printed once, nothing secret anywhere else."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from gateway.errors import AuthenticationFailed
from gateway.keys import cli
from gateway.keys.directory import KeyDirectory
from gateway.keys.store import RedisKeyStore
from gateway.keys.vault import generate_encryption_key
from tests.redis_helpers import redis_client


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    async with redis_client(redis_url) as redis:
        yield redis


def gateway_keys(redis_url: str, prefix: str, *argv: str) -> int:
    return cli.main(["-c", "/nonexistent/config.yaml", "keys", "--redis-url", redis_url, "--prefix", prefix, *argv])


async def test_create_prints_the_value_once_and_it_authenticates(
    redis_url: str, redis_prefix: str, client: aioredis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["create", "team-b", "--deployments", "instruct,tag:fast", "--rpm", "60", "--budget-tokens", "1000"]
    assert await _in_thread(redis_url, redis_prefix, *argv) == 0
    out, err = capsys.readouterr()
    value = out.strip()
    assert value.startswith("gw-")
    assert value not in err
    record = await KeyDirectory([], RedisKeyStore(client, redis_prefix)).authenticate({"apikey": value})
    assert (record.limits.rpm, record.budget.tokens if record.budget else None) == (60, 1000)
    assert await _in_thread(redis_url, redis_prefix, "list") == 0
    listed, _ = capsys.readouterr()
    assert "team-b" in listed
    assert value not in listed
    assert record.sha256 not in listed


async def test_rotate_and_revoke(
    redis_url: str, redis_prefix: str, client: aioredis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    await _in_thread(redis_url, redis_prefix, "create", "team-b")
    old = capsys.readouterr().out.strip()
    assert await _in_thread(redis_url, redis_prefix, "rotate", "team-b") == 0
    new = capsys.readouterr().out.strip()
    directory = KeyDirectory([], RedisKeyStore(client, redis_prefix, cache_ttl_s=0))
    assert (await directory.authenticate({"apikey": new})).name == "team-b"
    assert await _in_thread(redis_url, redis_prefix, "revoke", "team-b") == 0
    for value in (old, new):
        with pytest.raises(AuthenticationFailed):
            await directory.authenticate({"apikey": value})
    assert await _in_thread(redis_url, redis_prefix, "revoke", "nobody") == 1


async def test_a_virtual_key_is_read_from_stdin_and_stored_encrypted(
    redis_url: str,
    redis_prefix: str,
    client: aioredis.Redis,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GATEWAY_ENCRYPTION_KEY", generate_encryption_key())
    monkeypatch.setattr("sys.stdin", io.StringIO("sk-from-stdin-secret\n"))
    assert await _in_thread(redis_url, redis_prefix, "add-virtual", "openai-b", "--provider", "openai") == 0
    out, err = capsys.readouterr()
    assert "sk-from-stdin-secret" not in out + err
    raw = await client.hget(f"{redis_prefix}vkeys", "openai-b")
    assert raw is not None
    assert b"sk-from-stdin-secret" not in raw


def test_no_redis_is_an_error_not_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["-c", "/nonexistent/config.yaml", "keys", "list"]) == 1
    assert "error:" in capsys.readouterr().err


def test_an_encryption_key_can_be_generated(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["keys", "encryption-key"]) == 0
    assert len(capsys.readouterr().out.strip()) == 44


async def _in_thread(redis_url: str, prefix: str, *argv: str) -> int:
    """The command runs its own event loop, as it does from a shell."""
    return await asyncio.to_thread(gateway_keys, redis_url, prefix, *argv)
