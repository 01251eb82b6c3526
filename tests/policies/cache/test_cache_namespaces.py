"""Cache namespaces never let one key read another tenant's entries by picking a name: every key's
entries are its own (a `cache_namespace` subdivides them), and only keys an admin gave the same
explicit `cache_namespace` in the config file share theirs. Real HTTP on loopback, real Redis,
keys created through the admin API and the CLI as an operator would."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from gateway import cli
from tests.conftest import GatewayFactory, deployment
from tests.support.cache_e2e_helpers import body, post
from tests.support.fake_upstream import FakeUpstream

ADMIN_KEY = "admin-key-namespaces-0123456789-Kq4Wz"
ENV = {
    "ADMIN_KEY": ADMIN_KEY,
    "TEAM_A_KEY": "team-a-key-0123456789",
    "TEAM_B_KEY": "team-b-key-0123456789",
    "OPS_1_KEY": "ops-one-key-0123456789",
    "OPS_2_KEY": "ops-two-key-0123456789",
}


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def namespaces_config(upstream: FakeUpstream, redis: dict[str, str]) -> dict[str, Any]:
    return {
        "redis": redis,
        "admin": {"key": "${ADMIN_KEY}"},
        "keys": [
            {"name": "team-a", "key": "${TEAM_A_KEY}"},
            {"name": "team-b", "key": "${TEAM_B_KEY}", "cache_namespace": "team-a"},  # another key's name
            {"name": "ops-1", "key": "${OPS_1_KEY}", "cache_namespace": "ops"},  # shared by the admin…
            {"name": "ops-2", "key": "${OPS_2_KEY}", "cache_namespace": "ops"},  # …in the config file
        ],
        "deployments": [deployment("fake", upstream.base_url, timeout_s=5, retries=0, policies=["cached"])],
        "policies": {"cached": {"cache": {}}},
    }


@pytest.fixture
async def gateway(make_gateway: GatewayFactory, upstream: FakeUpstream, redis_settings: dict[str, str]) -> TestServer:
    return await make_gateway(namespaces_config(upstream, redis_settings), ENV)


async def status(http: ClientSession, gateway: TestServer, key: str, prompt: str) -> str | None:
    seen = await post(http, gateway, body(prompt), bearer(key))
    assert seen.status == 200, seen.raw
    return seen.cache


async def created_by_the_admin_api(http: ClientSession, gateway: TestServer, name: str, namespace: str) -> str:
    async with http.post(
        gateway.make_url("/admin/keys"), json={"name": name, "cache_namespace": namespace}, headers=bearer(ADMIN_KEY)
    ) as response:
        assert response.status == 201, await response.text()
        created: dict[str, Any] = await response.json()
    assert created["record"]["cache_namespace"] == namespace
    value: str = created["key"]
    return value


async def created_by_the_cli(
    redis: dict[str, str], name: str, namespace: str, capsys: pytest.CaptureFixture[str]
) -> str:
    argv = ["-c", "/nonexistent/config.yaml", "keys", "--redis-url", redis["url"], "--prefix", redis["prefix"]]
    argv += ["create", name, "--cache-namespace", namespace]
    assert await asyncio.to_thread(cli.main, argv) == 0  # it runs its own event loop, as from a shell
    return capsys.readouterr().out.strip()


@pytest.mark.parametrize("namespace", ["team-a", "ops"])
async def test_a_key_created_through_the_admin_api_cannot_read_another_tenants_entries_by_their_name(
    gateway: TestServer, upstream: FakeUpstream, http: ClientSession, namespace: str
) -> None:
    owner = ENV["TEAM_A_KEY"] if namespace == "team-a" else ENV["OPS_1_KEY"]
    assert await status(http, gateway, owner, "private question") == "MISS"
    assert await status(http, gateway, owner, "private question") == "HIT"
    squatter = await created_by_the_admin_api(http, gateway, "squatter", namespace)

    assert await status(http, gateway, squatter, "private question") == "MISS"
    assert await status(http, gateway, squatter, "private question") == "HIT"  # its own entry, now
    assert len(upstream.received) == 2


async def test_a_key_created_with_the_cli_cannot_read_another_tenants_entries_by_their_name(
    gateway: TestServer,
    upstream: FakeUpstream,
    http: ClientSession,
    redis_settings: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert await status(http, gateway, ENV["TEAM_A_KEY"], "private question") == "MISS"
    squatters = [
        await created_by_the_cli(redis_settings, "cli-squatter-a", "team-a", capsys),
        await created_by_the_cli(redis_settings, "cli-squatter-ops", "ops", capsys),
    ]

    assert [await status(http, gateway, squatter, "private question") for squatter in squatters] == ["MISS", "MISS"]
    assert len(upstream.received) == 3


async def test_only_keys_an_admin_gave_one_namespace_in_the_config_file_share_entries(
    gateway: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    assert await status(http, gateway, ENV["OPS_1_KEY"], "shared question") == "MISS"
    assert await status(http, gateway, ENV["OPS_2_KEY"], "shared question") == "HIT"  # granted by the admin
    assert await status(http, gateway, ENV["TEAM_A_KEY"], "team question") == "MISS"
    # A config key naming another key as its namespace does not reach that key's entries either.
    assert await status(http, gateway, ENV["TEAM_B_KEY"], "team question") == "MISS"
    assert len(upstream.received) == 3


async def test_two_keys_from_the_api_with_one_namespace_share_nothing(
    gateway: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    first = await created_by_the_admin_api(http, gateway, "api-one", "same")
    second = await created_by_the_admin_api(http, gateway, "api-two", "same")

    assert await status(http, gateway, first, "question") == "MISS"
    assert await status(http, gateway, second, "question") == "MISS"
    assert len(upstream.received) == 2
