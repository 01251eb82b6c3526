"""Bounded authentication: made-up keys cannot push real ones out of the key cache, failed
authentications are throttled per client address (API keys and the admin key) and counted, the
admin key must be strong, the credential that made an answer partitions the cache, /metrics is
local-only by default on a keyed gateway, and the admin API refuses and shows expired keys.

Real HTTP over loopback; a real Redis where keys live there. A second client address is
127.0.0.2 (the whole of 127.0.0.0/8 is loopback on Linux), bound as the client's local address."""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import ClientSession, TCPConnector
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from gateway.api.credentials import admin_key_weakness, hash_key
from gateway.app import AUTH_THROTTLE, create_app
from gateway.config.loader import parse_config
from gateway.http.app_keys import OBSERVABILITY
from gateway.keys.records import KeyRecord
from gateway.keys.store import KNOWN_CACHE_SIZE, RedisKeyStore
from gateway.keys.throttle import ADMIN_FAILURES_PER_WINDOW, API_FAILURES_PER_WINDOW, FailureThrottle, client_address
from gateway.observability.endpoints import is_local_peer
from tests.conftest import GatewayFactory, deployment
from tests.gateway.config.test_cli import run_gateway, write
from tests.support.fake_upstream import FakeUpstream
from tests.support.redis_helpers import RedisProxy, redis_client

TEAM_KEY = "team-key-bounds-0123456789abcdef"
ADMIN_KEY = "admin-key-bounds-7Qm2xVt9LpR4wZk8Nc"
WEAK_ADMIN_KEY = "admin-key-0123456789"  # 20 characters
PROVIDER_SECRET = "sk-bounds-provider-secret-0123456789"
ENV = {"TEAM_KEY": TEAM_KEY, "ADMIN_KEY": ADMIN_KEY, "VK_SECRET": PROVIDER_SECRET}


def config(upstream: FakeUpstream, **extra: Any) -> dict[str, Any]:
    return {
        "admin": {"key": "${ADMIN_KEY}"},
        "keys": [{"name": "team", "key": "${TEAM_KEY}", "virtual_keys": ["openai-main"]}],
        "virtual_keys": [{"name": "openai-main", "provider": "openai", "api_key": "${VK_SECRET}"}],
        "deployments": [deployment("fake", upstream.base_url, retries=0)],
        **extra,
    }


@pytest.fixture
async def other_address() -> AsyncIterator[ClientSession]:
    """A client whose connections come from 127.0.0.2."""
    async with ClientSession(connector=TCPConnector(local_addr=("127.0.0.2", 0))) as session:
        yield session


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def models(http: ClientSession, gateway: TestServer, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    async with http.get(gateway.make_url("/v1/models"), headers=headers) as response:
        return response.status, await response.json(content_type=None)


async def scrape(http: ClientSession, gateway: TestServer) -> str:
    async with http.get(gateway.make_url("/metrics")) as response:
        assert response.status == 200
        return await response.text()


def sample(text: str, series: str, **labels: str) -> float:
    wanted = ",".join(f'{name}="{value}"' for name, value in labels.items())
    match = re.search(rf"^{re.escape(series)}\{{{re.escape(wanted)}\}} (\S+)$", text, re.MULTILINE)
    assert match is not None, f"{series}{{{wanted}}} not in the scrape"
    return float(match.group(1))


# --- 7. made-up keys never evict a real one --------------------------------------------------------


async def test_ten_thousand_unknown_keys_do_not_push_a_real_redis_key_out_of_its_last_view(
    aiohttp_server: AiohttpServer,
    upstream: FakeUpstream,
    http: ClientSession,
    redis_url: str,
    redis_prefix: str,
) -> None:
    proxy = await RedisProxy(redis_url).start()
    try:
        settings = {
            "redis": {"url": proxy.url, "prefix": redis_prefix},
            # Every lookup asks Redis: the last view is only ever used because Redis failed.
            "admin": {"key": "${ADMIN_KEY}", "key_cache_ttl_s": 0},
            "deployments": [deployment("fake", upstream.base_url, retries=0)],
        }
        loaded = parse_config(yaml.safe_dump(settings), ENV, source="test-config.yaml")
        gateway = await aiohttp_server(create_app(loaded))
        gateway.app[AUTH_THROTTLE].limit = 1_000_000  # one client plays a whole botnet here
        async with http.post(
            gateway.make_url("/admin/keys"), json={"name": "real"}, headers=bearer(ADMIN_KEY)
        ) as created:
            assert created.status == 201
            real = (await created.json())["key"]
        assert (await models(http, gateway, bearer(real)))[0] == 200  # seen once: its view is kept

        statuses: dict[int, int] = {}
        guesses = iter(range(10_500))

        async def guess() -> None:
            for _ in guesses:
                status, _ = await models(http, gateway, bearer("gw-" + secrets.token_urlsafe(32)))
                statuses[status] = statuses.get(status, 0) + 1

        await asyncio.gather(*(guess() for _ in range(16)))
        # None was accepted. A lookup that a starved machine let time out is a 503 (the store failed),
        # so count only that more unknown keys were judged than the known keys' LRU holds.
        assert set(statuses) <= {401, 503}
        assert statuses[401] > KNOWN_CACHE_SIZE

        await proxy.stop()  # Redis is gone
        status, body = await models(http, gateway, bearer(real))
        assert status == 200, body
        unknown_now, _ = await models(http, gateway, bearer("gw-" + secrets.token_urlsafe(32)))
        assert unknown_now == 503  # a key never seen cannot be judged without Redis
    finally:
        await proxy.stop()


async def test_unknown_hashes_live_in_a_bounded_cache_of_their_own(redis_url: str, redis_prefix: str) -> None:
    now = [0.0]
    async with redis_client(redis_url) as client:
        store = RedisKeyStore(
            client, redis_prefix, cache_ttl_s=5, cache_size=2, unknown_cache_size=3, clock=lambda: now[0]
        )
        record = KeyRecord(name="real", sha256=hash_key("real-value"))
        assert await store.create(record)
        assert await store.lookup(record.sha256) == record
        for index in range(50):
            assert await store.lookup(hash_key(f"guess-{index}")) is None
        assert list(store._cache) == [record.sha256]  # the known keys' cache holds only known keys
        assert len(store._unknown) == 3  # the negative cache stays within its own bound
        assert store._unknown_ttl_s == 1.0  # and forgets an unknown hash sooner than a known key


# --- 7. failed authentications throttled per address, and counted -----------------------------------


async def test_failed_authentications_are_throttled_per_client_address_and_counted(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, other_address: ClientSession
) -> None:
    gateway = await make_gateway(config(upstream), ENV)
    assert (await models(http, gateway, {}))[0] == 401  # missing: counted, never throttled
    for _ in range(API_FAILURES_PER_WINDOW):
        status, body = await models(http, gateway, bearer("gw-guess-" + secrets.token_hex(8)))
        assert (status, body["error"]["code"]) == (401, "invalid_api_key")

    async with http.get(gateway.make_url("/v1/models"), headers=bearer("gw-one-more-guess")) as refused:
        assert refused.status == 429
        assert int(refused.headers["Retry-After"]) >= 1
        error = (await refused.json())["error"]
    assert error["code"] == "too_many_auth_failures"
    assert error["type"] == "rate_limit_error"
    # Throttled means not even looked at: the real key from that address is refused too...
    assert (await models(http, gateway, bearer(TEAM_KEY)))[0] == 429
    async with http.post(
        gateway.make_url("/v1/completions"), json={"model": "fake", "prompt": "hi"}, headers=bearer(TEAM_KEY)
    ) as completion:
        assert completion.status == 429
    # ...while another address is not.
    assert (await models(other_address, gateway, bearer(TEAM_KEY)))[0] == 200
    assert (await models(other_address, gateway, bearer("gw-guess-from-elsewhere")))[0] == 401

    text = await scrape(http, gateway)
    assert sample(text, "gateway_auth_failures_total", reason="missing") == 1
    assert sample(text, "gateway_auth_failures_total", reason="unknown") == API_FAILURES_PER_WINDOW + 1
    assert sample(text, "gateway_auth_failures_total", reason="throttled") == 3
    assert sample(text, "gateway_auth_failures_total", reason="expired") == 0
    assert sample(text, "gateway_auth_failures_total", reason="revoked") == 0
    assert "gw-guess" not in text
    assert "127.0.0" not in text


def test_a_throttle_forgets_an_address_once_its_window_is_over() -> None:
    now = [100.0]
    throttle = FailureThrottle(3, 60, max_addresses=2, clock=lambda: now[0])
    for _ in range(3):
        assert throttle.retry_after("a") is None
        throttle.failed("a")
    assert throttle.retry_after("a") == 60
    now[0] += 59.5
    assert throttle.retry_after("a") == 1
    now[0] += 1
    assert throttle.retry_after("a") is None
    throttle.failed("b")
    throttle.failed("c")
    throttle.failed("d")  # bounded: the oldest address is dropped
    assert len(throttle._windows) == 2


def test_failures_are_counted_against_the_transport_address() -> None:
    assert client_address("127.0.0.2") == "127.0.0.2"
    assert client_address("::ffff:10.1.2.3") == "10.1.2.3"
    assert client_address("2001:db8:1:2:3:4:5:6") == client_address("2001:db8:1:2:ffff::1") == "2001:db8:1:2::/64"
    assert client_address(None) == "local"


# --- 8. the admin key: strong enough, throttled, logged with the address ------------------------------


def test_a_weak_admin_key_turns_the_admin_api_off_with_a_warning_and_check_config_says_so(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    for weak in (WEAK_ADMIN_KEY, "a" * 40, "password" * 4):
        assert admin_key_weakness(weak) is not None
    assert admin_key_weakness(ADMIN_KEY) is None
    assert admin_key_weakness(secrets.token_hex(16)) is None  # `openssl rand -hex 16`

    loaded = parse_config(yaml.safe_dump(config(upstream)), {**ENV, "ADMIN_KEY": WEAK_ADMIN_KEY}, source="t.yaml")
    warnings = [warning for warning in loaded.warnings if warning.startswith("admin.key is too weak")]
    assert len(warnings) == 1
    assert "20 characters, fewer than 32" in warnings[0]
    assert WEAK_ADMIN_KEY not in str(loaded.warnings)

    path = write(tmp_path, config(upstream))
    result = run_gateway("check-config", str(path), env={**ENV, "ADMIN_KEY": WEAK_ADMIN_KEY})
    assert "warning: admin.key is too weak to guard the admin API" in result.stdout
    assert WEAK_ADMIN_KEY not in result.stdout + result.stderr


async def test_a_weak_admin_key_leaves_the_admin_api_off(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    gateway = await make_gateway(config(upstream), {**ENV, "ADMIN_KEY": WEAK_ADMIN_KEY})
    async with http.get(gateway.make_url("/admin/keys"), headers=bearer(WEAK_ADMIN_KEY)) as response:
        assert response.status == 404
    assert "admin.key is too weak" in caplog.text  # the start-up warning
    assert (await models(http, gateway, bearer(TEAM_KEY)))[0] == 200  # the rest serves
    assert (await models(http, gateway, {}))[0] == 401  # and still wants keys


async def test_admin_key_guesses_are_throttled_logged_with_the_address_and_counted(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    other_address: ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.keys.admin")
    gateway = await make_gateway(config(upstream), ENV)
    guesses = [f"guess-{secrets.token_hex(12)}" for _ in range(ADMIN_FAILURES_PER_WINDOW + 1)]
    statuses = []
    for guess in guesses:
        async with http.get(gateway.make_url("/admin/keys"), headers=bearer(guess)) as response:
            statuses.append(response.status)
            last = response
            body = await response.json()
    assert statuses == [401] * ADMIN_FAILURES_PER_WINDOW + [429]
    assert body["error"]["code"] == "too_many_auth_failures"
    assert int(last.headers["Retry-After"]) >= 1
    async with http.get(gateway.make_url("/admin/keys"), headers=bearer(ADMIN_KEY)) as right_but_throttled:
        assert right_but_throttled.status == 429  # no oracle while throttled
    async with other_address.get(gateway.make_url("/admin/keys"), headers=bearer("guess-elsewhere")) as elsewhere:
        assert elsewhere.status == 401
    async with other_address.get(gateway.make_url("/admin/keys"), headers=bearer(ADMIN_KEY)) as right:
        assert right.status == 200

    failures = [r.getMessage() for r in caplog.records if "invalid admin key" in r.getMessage()]
    assert len(failures) == ADMIN_FAILURES_PER_WINDOW + 1
    assert sum("from 127.0.0.1" in line for line in failures) == ADMIN_FAILURES_PER_WINDOW
    assert sum("from 127.0.0.2" in line for line in failures) == 1
    assert not any(guess in caplog.text for guess in [*guesses, "guess-elsewhere"])
    text = await scrape(http, gateway)
    assert sample(text, "gateway_admin_auth_failures_total", reason="invalid") == ADMIN_FAILURES_PER_WINDOW + 1
    assert sample(text, "gateway_admin_auth_failures_total", reason="throttled") == 2
    assert sample(text, "gateway_auth_failures_total", reason="unknown") == 0  # the two counters are apart


# --- 9. the credential that answered partitions the cache --------------------------------------------


async def test_an_answer_made_with_the_deployments_credential_is_not_served_to_a_virtual_keys_request(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    cached = config(upstream, policies={"cached": {"cache": {"ttl_s": 60, "redis": False}}})
    cached["deployments"] = [deployment("fake", upstream.base_url, retries=0, policies=["cached"])]
    gateway = await make_gateway(cached, ENV)
    own, virtual = bearer(TEAM_KEY), {**bearer(TEAM_KEY), "x-gateway-virtual-key": "openai-main"}
    body = {"model": "fake", "prompt": "same question", "max_tokens": 5, "temperature": 0}
    seen = []
    for headers in (own, own, virtual, virtual, own):
        async with http.post(gateway.make_url("/v1/completions"), json=body, headers=headers) as response:
            assert response.status == 200
            seen.append(response.headers["x-gateway-cache-status"])
    assert seen == ["MISS", "HIT", "MISS", "HIT", "HIT"]
    sent = [request.headers.get("Authorization") for request in upstream.received]
    assert sent == [None, f"Bearer {PROVIDER_SECRET}"]  # one upstream call per credential


# --- 11. /metrics and the dashboard: local-only by default on a keyed gateway ---------------------------


def test_the_local_peer_check() -> None:
    for local in ("127.0.0.1", "127.0.0.2", "127.255.0.9", "::1", "::ffff:127.0.0.1", None, ""):
        assert is_local_peer(local), local
    for remote in ("10.0.0.1", "192.168.1.20", "2001:db8::1", "::ffff:10.0.0.1", "not-an-address"):
        assert not is_local_peer(remote), remote


async def test_metrics_and_dashboard_answer_only_local_clients_when_keys_are_configured(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    loaded = parse_config(yaml.safe_dump(config(upstream)), ENV, source="t.yaml")
    assert any(w.startswith("/metrics, /dashboard and /dashboard/data answer loopback") for w in loaded.warnings)
    gateway = await make_gateway(config(upstream), ENV)
    for path in ("/metrics", "/dashboard", "/dashboard/data"):
        async with http.get(gateway.make_url(path)) as response:
            assert response.status == 200, path  # this test's client is on loopback
    endpoints = gateway.app[OBSERVABILITY].endpoints
    assert endpoints is not None
    assert endpoints.local_only
    endpoints.is_local = lambda remote: False  # as a client from another machine
    for path in ("/metrics", "/dashboard", "/dashboard/data"):
        async with http.get(gateway.make_url(path)) as response:
            assert response.status == 403, path
            error = (await response.json())["error"]
            assert (error["code"], error["type"]) == ("metrics_local_only", "permission_error")


@pytest.mark.parametrize(
    ("settings", "env", "local_only"),
    [
        pytest.param({"keys": [], "admin": {}}, {}, False, id="open-gateway"),
        pytest.param(
            {"observability": {"metrics": {"key": "${METRICS_KEY}"}}}, {"METRICS_KEY": "m" * 8}, False, id="key"
        ),
        pytest.param({"observability": {"metrics": {"port": 1}}}, {}, False, id="own-port"),
        pytest.param({}, {}, True, id="keyed"),
    ],
)
def test_which_gateways_keep_metrics_local(
    upstream: FakeUpstream, settings: dict[str, Any], env: dict[str, str], local_only: bool
) -> None:
    loaded = parse_config(yaml.safe_dump({**config(upstream), **settings}), {**ENV, **env}, source="t.yaml")
    endpoints = create_app(loaded)[OBSERVABILITY].endpoints
    assert endpoints is not None
    assert endpoints.local_only is local_only


async def test_an_open_gateway_keeps_metrics_open_to_everyone(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await make_gateway({"deployments": [deployment("fake", upstream.base_url)]})
    endpoints = gateway.app[OBSERVABILITY].endpoints
    assert endpoints is not None
    endpoints.is_local = lambda remote: False
    async with http.get(gateway.make_url("/metrics")) as response:
        assert response.status == 200


# --- 11. expiry in the admin API ------------------------------------------------------------------


async def test_the_admin_api_refuses_a_past_expiry_and_shows_expired_keys_as_expired(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, redis_settings: dict[str, str]
) -> None:
    settings = config(upstream, redis=redis_settings)
    settings["keys"].append({"name": "old", "key": "${OLD_KEY}", "expires_at": "2001-01-01T00:00:00Z"})
    gateway = await make_gateway(settings, {**ENV, "OLD_KEY": "old-key-0123456789abcdef"})
    admin = bearer(ADMIN_KEY)
    async with http.post(
        gateway.make_url("/admin/keys"), json={"name": "late", "expires_at": "2020-05-01T00:00:00"}, headers=admin
    ) as refused:
        assert refused.status == 400
        error = (await refused.json())["error"]
    assert error["param"] == "expires_at"
    assert "future" in error["message"]
    async with http.post(
        gateway.make_url("/admin/keys"), json={"name": "fresh", "expires_at": "2999-01-01T00:00:00Z"}, headers=admin
    ) as created:
        assert created.status == 201
        assert (await created.json())["record"]["status"] == "active"
    async with http.get(gateway.make_url("/admin/keys"), headers=admin) as listed:
        statuses = {record["name"]: record["status"] for record in (await listed.json())["data"]}
    assert statuses == {"team": "active", "old": "expired", "fresh": "active"}
    async with http.get(gateway.make_url("/admin/keys/old"), headers=admin) as shown:
        record = await shown.json()
    assert record["status"] == "expired"
    assert record["expires_at"].startswith("2001-01-01")
    async with http.post(gateway.make_url("/admin/keys/fresh/revoke"), headers=admin) as revoked:
        assert (await revoked.json())["status"] == "revoked"
