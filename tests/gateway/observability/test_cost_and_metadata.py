"""Per-request metadata (`x-gateway-metadata`), client request ids, and the cost of every answer:
the `x-gateway-cost-usd` header, the access log, `gateway_cost_usd_total` and the admin API's spend
view, which adds up exactly across concurrent requests on real Redis."""

from __future__ import annotations

import asyncio
import hashlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession, web

from gateway.pipeline.cost import TokenUsage, cost_nano, usd
from policies.limits.specs import Price
from tests.conftest import GatewayFactory, deployment, upstream_url
from tests.support.fake_upstream import FakeUpstream, completion, stream
from tests.support.observability_helpers import log_lines, scrape, value

ADMIN_KEY = "adm-" + "0123456789abcdef" * 3
PRICE = {"prompt_per_1m": 1.5, "completion_per_1m": 2.25, "cached_prompt_per_1m": 0.375}
CALLER = "gw-caller-key-for-spend"


def with_cached_tokens(cached: int) -> Any:
    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        answer = completion(body)
        answer["usage"] = {
            "prompt_tokens": 100,
            "completion_tokens": 10,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        return web.json_response(answer)

    return behaviour


def config_for(upstream: FakeUpstream, log: Path, redis: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "deployments": [
            deployment("priced", upstream_url(upstream), price=PRICE, retries=0, policies=["cached"]),
            deployment("free", upstream_url(upstream), retries=0),
        ],
        "policies": {"cached": {"cache": {}}},
        "keys": [{"name": "team-key", "key": "${CALLER}", "metadata": {"team": "search", "env": "prod"}}],
        "admin": {"key": "${ADMIN}"},
        "observability": {"access_log": {"path": str(log)}, "spend": {"metadata_keys": ["team"]}},
        **extra,
    }
    if redis is not None:
        config["redis"] = redis
    return config


ENV = {"CALLER": CALLER, "ADMIN": ADMIN_KEY}
AUTH = {"Authorization": f"Bearer {CALLER}"}


@pytest.mark.parametrize(
    "header",
    [
        "not json",
        "[1, 2]",
        '{"team": 3}',
        '{"bad key!": "x"}',
        '{"team": "' + "x" * 257 + '"}',
        orjson.dumps({f"k{i}": "v" for i in range(17)}).decode(),
        '{"team": "a\\u0007b"}',
    ],
)
@pytest.mark.parametrize("name", ["x-gateway-metadata", "x-portkey-metadata"])
async def test_malformed_metadata_is_a_400_naming_the_header(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path, name: str, header: str
) -> None:
    gateway = await make_gateway(config_for(upstream, tmp_path / "a.log"), ENV)

    body = {"model": "free", "prompt": "x"}
    async with http.post(gateway.make_url("/v1/completions"), json=body, headers={**AUTH, name: header}) as response:
        assert response.status == 400
        error = (await response.json())["error"]
    assert (error["code"], error["param"]) == ("invalid_header", name)
    assert header not in error["message"]
    assert upstream.received == []


async def test_the_keys_own_metadata_wins_the_caller_only_adds_fields_and_never_in_a_metric_label(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path
) -> None:
    log = tmp_path / "a.log"
    gateway = await make_gateway(config_for(upstream, log), ENV)
    headers = {
        **AUTH,
        "x-gateway-metadata": '{"team": "ads", "feature": "autocomplete"}',
        "x-request-id": "client-1.a/b",
    }

    async with http.post(
        gateway.make_url("/v1/completions"), json={"model": "free", "prompt": "x"}, headers=headers
    ) as r:
        assert r.status == 200
        assert r.headers["x-request-id"] == "client-1.a/b"
        assert "x-gateway-cost-usd" not in r.headers  # no price: no cost to state
    bad_id = {**AUTH, "x-request-id": "has spaces and ;"}
    async with http.post(
        gateway.make_url("/v1/completions"), json={"model": "free", "prompt": "x"}, headers=bad_id
    ) as r:
        assert r.status == 200
        assert r.headers["x-request-id"] != bad_id["x-request-id"]

    first, second = await log_lines(log, 2)
    assert first["metadata"] == {"team": "search", "env": "prod", "feature": "autocomplete"}  # not "ads"
    assert first["request_id"] == "client-1.a/b"
    assert second["metadata"] == {"team": "search", "env": "prod"}
    assert upstream.received[0].headers["x-request-id"] == "client-1.a/b"  # forwarded upstream as kept
    metrics = await scrape(http, str(gateway.make_url("/metrics")))
    assert not any(dict(labels).get(name) for _, labels in metrics for name in ("team", "feature", "env"))
    assert not any(value in str(labels) for _, labels in metrics for value in ("autocomplete", "ads"))


def test_cost_is_priced_per_million_tokens_with_cached_prompt_tokens_at_their_own_price() -> None:
    price = Price(**PRICE)
    usage = TokenUsage(prompt_tokens=100, completion_tokens=10, cached_tokens=40)
    # 60 x 1.5 + 40 x 0.375 + 10 x 2.25 = 127.5 USD per million tokens = 127.5 micro-dollars
    assert cost_nano(price, usage) == 127_500
    assert usd(127_500) == "0.0001275"
    assert cost_nano(Price(prompt_per_1m=1.5, completion_per_1m=2.25), usage) == 172_500  # no cached price
    assert usd(0) == "0"
    assert usd(3 * 10**9 + 5) == "3.000000005"


def test_prompt_cache_writes_are_priced_apart_from_reads_and_fresh_prompt_tokens() -> None:
    price = Price(**PRICE, cache_write_per_1m=1.875)
    usage = TokenUsage.of(
        {
            "prompt_tokens": 100,
            "completion_tokens": 10,
            "prompt_tokens_details": {"cached_tokens": 40, "cache_write_tokens": 20},
        }
    )
    assert usage == TokenUsage(100, 10, 40, 20)
    # 40 fresh x 1.5 + 40 read x 0.375 + 20 written x 1.875 + 10 x 2.25 = 135 USD per million tokens
    assert cost_nano(price, usage) == 135_000
    assert cost_nano(Price(**PRICE), usage) == 127_500  # no write price: writes are prompt tokens
    # More writes than fresh prompt tokens (a malformed report) never make a negative charge.
    assert price.cost_per_1m(10, 0, 4, 99) == 6 * 1.875 + 4 * 0.375


async def test_every_answer_states_its_cost_and_a_cache_hit_what_it_saved(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path
) -> None:
    log = tmp_path / "a.log"
    gateway = await make_gateway(config_for(upstream, log), ENV)
    url = gateway.make_url("/v1/completions")
    upstream.script(with_cached_tokens(40))
    body = {"model": "priced", "prompt": "cached prompt", "temperature": 0}

    async with http.post(url, json=body, headers=AUTH) as response:
        assert response.status == 200
        assert response.headers["x-gateway-cost-usd"] == "0.0001275"
    async with http.post(url, json=body, headers=AUTH) as response:  # the same: a cache hit
        assert response.headers["x-gateway-cache-status"] == "HIT"
        assert response.headers["x-gateway-cost-usd"] == "0"
        assert response.headers["x-gateway-cost-saved-usd"] == "0.0001275"
    upstream.script(stream(["a", "b", "c"]))
    streamed = {"model": "priced", "prompt": "s", "stream": True, "stream_options": {"include_usage": True}}
    async with http.post(url, json=streamed, headers={**AUTH, "Cache-Control": "no-store"}) as response:
        assert "x-gateway-cost-usd" not in response.headers  # sent before the usage is known: in the log
        await response.read()

    paid, hit, streamed_line = await log_lines(log, 3)
    assert paid["cost_usd"] == pytest.approx(127.5e-6)
    assert (hit["cost_usd"], hit["cost_saved_usd"]) == (0, pytest.approx(127.5e-6))
    usage = streamed_line["prompt_tokens"] * 1.5 + streamed_line["completion_tokens"] * 2.25
    assert streamed_line["cost_usd"] == pytest.approx(usage / 1e6)
    assert streamed_line["cost_usd"] > 0
    metrics = await scrape(http, str(gateway.make_url("/metrics")))
    total = value(metrics, "gateway_cost_usd_total", deployment="priced")
    assert total == pytest.approx(127.5e-6 + streamed_line["cost_usd"])


async def test_a_cost_budget_is_charged_what_the_answers_cost_headers_state_cached_prompt_tokens_included(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path
) -> None:
    """Cached prompt tokens are billed at their own price by the key's budget too, not at the prompt
    price: the budget's spend is the sum of what the answers said they cost."""
    config = config_for(upstream, tmp_path / "a.log")
    config["keys"][0]["budget"] = {"cost_usd": 1.0, "period": "1d"}
    gateway = await make_gateway(config, ENV)
    upstream.script(with_cached_tokens(40), with_cached_tokens(100))
    body = {"model": "priced", "prompt": "p", "temperature": 0}
    stated = []
    for _ in range(2):
        async with http.post(
            gateway.make_url("/v1/completions"), json=body, headers={**AUTH, "Cache-Control": "no-store"}
        ) as response:
            assert response.status == 200
            stated.append(float(response.headers["x-gateway-cost-usd"]))
    # 60 x 1.5 + 40 x 0.375 + 10 x 2.25 = 127.5e-6 USD; then 100 x 0.375 + 10 x 2.25 = 60e-6 USD
    assert stated == [pytest.approx(127.5e-6), pytest.approx(60e-6)]

    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with http.get(gateway.make_url("/admin/keys/team-key/usage"), headers=admin) as response:
        assert response.status == 200
        spent = await response.json()
    assert spent["cost_usd"] == pytest.approx(sum(stated), rel=1e-9)
    assert spent["tokens"] == 2 * 110
    assert spent["reserved_cost_usd"] == 0


async def test_spend_per_key_deployment_and_metadata_is_exact_across_concurrent_requests_on_redis(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    tmp_path: Path,
    redis_settings: dict[str, str],
) -> None:
    config = config_for(upstream, tmp_path / "a.log", redis_settings)
    config["keys"].append({"name": "other-key", "sha256": hashlib.sha256(b"gw-other").hexdigest()})
    gateways = [await make_gateway(config, ENV) for _ in range(2)]  # two replicas sharing Redis
    url_of = [gateway.make_url("/v1/completions") for gateway in gateways]

    async def one(index: int) -> Decimal:
        key = CALLER if index % 3 else "gw-other"
        team = ["ads", "search", "infra"][index % 3]
        headers = {"Authorization": f"Bearer {key}", "x-gateway-metadata": orjson.dumps({"team": team}).decode()}
        body = {"model": "priced", "prompt": f"prompt number {index} " * (index % 7 + 1), "max_tokens": 5}
        async with http.post(url_of[index % 2], json=body, headers=headers) as response:
            assert response.status == 200, await response.text()
            return Decimal(response.headers["x-gateway-cost-usd"])

    costs = await asyncio.gather(*(one(index) for index in range(60)))

    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    reports = {}
    for group in ("key", "deployment", "metadata.team", "team"):
        async with http.get(
            gateways[1].make_url("/admin/spend"), params={"group_by": group, "period": "1d"}, headers=admin
        ) as r:
            assert r.status == 200, await r.text()
            reports[group] = await r.json()
    await gateways[0].close()  # its last tally reaches Redis at shutdown, at the latest
    async with http.get(
        gateways[1].make_url("/admin/spend"), params={"group_by": "key", "period": "30d"}, headers=admin
    ) as r:
        by_key = await r.json()
    exact = int(sum(costs) * 10**9)
    assert by_key["total"]["cost_nano_usd"] == exact
    assert by_key["total"]["requests"] == 60
    assert {row["name"]: row["requests"] for row in by_key["groups"]} == {"team-key": 40, "other-key": 20}
    async with http.get(
        gateways[1].make_url("/admin/spend"), params={"group_by": "metadata.team", "period": "7d"}, headers=admin
    ) as r:
        by_team = await r.json()
    # team-key's own `team: search` wins over the header's; other-key has none: its header's counts.
    assert {row["name"]: row["requests"] for row in by_team["groups"]} == {"ads": 20, "search": 40}
    assert sum(row["cost_nano_usd"] for row in by_team["groups"]) == exact
    expected_by_team = {"ads": Decimal(0), "search": Decimal(0)}
    for index, cost in enumerate(costs):
        expected_by_team["search" if index % 3 else "ads"] += cost
    assert {row["name"]: Decimal(row["cost_nano_usd"]) / 10**9 for row in by_team["groups"]} == expected_by_team
    assert reports["team"]["group_by"] == "metadata.team"
    assert reports["deployment"]["groups"][0]["name"] == "priced"
    for bad in ({"group_by": "user"}, {"period": "0d"}, {"period": "2w"}):
        async with http.get(gateways[1].make_url("/admin/spend"), params=bad, headers=admin) as r:
            assert r.status == 400
            assert (await r.json())["error"]["param"] == next(iter(bad))
