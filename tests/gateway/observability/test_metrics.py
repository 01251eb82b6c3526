"""/metrics: the series move as requests flow, promtool accepts the scrape, no secret in any label."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from typing import Any

import pytest
from aiohttp import ClientSession
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import GatewayFactory, deployment
from tests.support import fake_upstream
from tests.support.fake_upstream import FakeUpstream
from tests.support.observability_helpers import scrape, value
from tests.support.stream_helpers import Gate

CLIENT_KEY = "gw-client-key-0123456789abcdef"
PROVIDER_KEY = "sk-provider-secret-0123456789abcdefghij"
METRICS_KEY = "metrics-scrape-token-0123456789"


def cached_config(upstream: FakeUpstream, **extra: Any) -> dict[str, Any]:
    return {
        "deployments": [deployment("fake", upstream.base_url, policies=["cached"], timeout_s=5)],
        "policies": {"cached": {"cache": {"ttl_s": 60}}},
        **extra,
    }


async def post(http: ClientSession, url: str, body: dict[str, Any], **headers: str) -> tuple[int, bytes]:
    async with http.post(url, json=body, headers=headers) as response:
        return response.status, await response.read()


async def test_counters_and_histograms_move_as_requests_flow(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await make_gateway(cached_config(upstream))
    url, metrics = str(gateway.make_url("/v1/completions")), str(gateway.make_url("/metrics"))
    before = await scrape(http, metrics)
    assert value(before, "gateway_requests_total") == 0
    assert value(before, "gateway_circuit_state", deployment="fake") == 0  # every deployment, from the start

    assert (await post(http, url, {"model": "fake", "prompt": "one"}))[0] == 200  # MISS
    assert (await post(http, url, {"model": "fake", "prompt": "one"}))[0] == 200  # HIT
    status, body = await post(http, url, {"model": "fake", "prompt": "two", "stream": True})
    assert status == 200
    assert body.endswith(b"[DONE]\n\n")
    assert (await post(http, url, {"model": "nope", "prompt": "x"}))[0] == 404

    after = await scrape(http, metrics)
    ok = {"deployment": "fake", "provider": "openai", "status_class": "2xx"}
    assert value(after, "gateway_requests_total", **ok, stream="false", cache_status="miss") == 1
    assert value(after, "gateway_requests_total", **ok, stream="false", cache_status="hit") == 1
    assert value(after, "gateway_requests_total", **ok, stream="true", cache_status="miss") == 1
    assert value(after, "gateway_requests_total", deployment="unrouted", status_class="4xx") == 1
    assert value(after, "gateway_request_duration_seconds_count", deployment="fake") == 3
    assert value(after, "gateway_overhead_seconds_count", deployment="fake") == 3
    assert value(after, "gateway_upstream_duration_seconds_count", deployment="fake") == 2  # not the HIT
    assert value(after, "gateway_time_to_first_token_seconds_count", deployment="fake") == 1  # the stream
    assert value(after, "gateway_cache_events_total", result="hit") == 1
    assert value(after, "gateway_cache_events_total", result="miss") == 2
    assert value(after, "gateway_in_flight_requests") == 0
    assert value(after, "gateway_build_info") == 1
    # Sub-millisecond overhead lands in buckets of its own, not all in the first.
    assert value(after, "gateway_overhead_seconds_bucket", deployment="fake", le="0.001") >= 1
    assert value(after, "gateway_overhead_seconds_bucket", deployment="fake", le="5e-05") < 3


async def test_in_flight_counts_a_request_while_it_waits_on_the_upstream(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await make_gateway({"deployments": [deployment("fake", upstream.base_url)]})
    gate = Gate()  # the upstream answers once the scrape is done: in flight during it on any machine
    upstream.script(gate.answer(upstream))
    pending = asyncio.ensure_future(
        post(http, str(gateway.make_url("/v1/completions")), {"model": "fake", "prompt": "s"})
    )
    await asyncio.wait_for(gate.opened.wait(), 30)
    during = await scrape(http, str(gateway.make_url("/metrics")))
    gate.release.set()
    await pending
    assert value(during, "gateway_in_flight_requests") == 1
    assert value(await scrape(http, str(gateway.make_url("/metrics"))), "gateway_in_flight_requests") == 0


async def test_retries_fallbacks_and_an_open_circuit_are_exported(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {
        "routing": {"backoff": {"initial_s": 0.001, "max_s": 0.001}, "breaker": {"consecutive_failures": 2}},
        "deployments": [
            deployment("fake", upstream.base_url, retries=1),
            deployment("down", "http://127.0.0.1:9/v1", retries=0, fallbacks=["fake"]),
        ],
    }
    gateway = await make_gateway(config)
    url = str(gateway.make_url("/v1/completions"))
    upstream.script(fake_upstream.status(500))
    assert (await post(http, url, {"model": "fake", "prompt": "retried"}))[0] == 200
    for _ in range(2):
        assert (await post(http, url, {"model": "down", "prompt": "falls back"}))[0] == 200

    scraped = await scrape(http, str(gateway.make_url("/metrics")))
    assert value(scraped, "gateway_retries_total", deployment="fake") == 1
    assert value(scraped, "gateway_fallbacks_total", deployment="down", fallback="fake") == 2
    assert value(scraped, "gateway_circuit_state", deployment="down") == 2  # open
    assert value(scraped, "gateway_circuit_state", deployment="fake") == 0


async def test_upstream_errors_are_counted_by_deployment_and_reason(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await make_gateway({"deployments": [deployment("fake", upstream.base_url, retries=0)]})
    upstream.script(fake_upstream.status(503))
    assert (await post(http, str(gateway.make_url("/v1/completions")), {"model": "fake", "prompt": "x"}))[0] == 502
    scraped = await scrape(http, str(gateway.make_url("/metrics")))
    assert value(scraped, "gateway_upstream_errors_total", deployment="fake", reason="status_5xx") == 1


async def test_tokens_are_counted_by_deployment_and_kind(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await make_gateway({"deployments": [deployment("fake", upstream.base_url)]})
    assert (await post(http, str(gateway.make_url("/v1/completions")), {"model": "fake", "prompt": "a b"}))[0] == 200
    scraped = await scrape(http, str(gateway.make_url("/metrics")))
    assert value(scraped, "gateway_tokens_total", deployment="fake", kind="prompt") == 5  # the fake's usage
    assert value(scraped, "gateway_tokens_total", deployment="fake", kind="completion") == 3


async def test_guardrail_verdicts_rate_limits_and_budgets_are_counted(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {
        "keys": [
            {"name": "slow", "key": "${SLOW_KEY}", "limits": {"rpm": 1}},
            # 20 tokens: the first request (3 + 16 estimated, 8 used) fits, the next (2 + 16) no longer does.
            {"name": "poor", "key": "${POOR_KEY}", "budget": {"tokens": 20}},
        ],
        "deployments": [deployment("fake", upstream.base_url, policies=["guarded"])],
        "policies": {"guarded": {"input": [{"check": "regex", "pattern": "forbidden", "action": "deny"}]}},
    }
    gateway = await make_gateway(config, {"SLOW_KEY": "slow-key-0123456789", "POOR_KEY": "poor-key-0123456789"})
    url = str(gateway.make_url("/v1/completions"))
    slow, poor = {"Authorization": "Bearer slow-key-0123456789"}, {"Authorization": "Bearer poor-key-0123456789"}
    assert (await post(http, url, {"model": "fake", "prompt": "fine"}, **slow))[0] == 200
    assert (await post(http, url, {"model": "fake", "prompt": "again"}, **slow))[0] == 429
    assert (await post(http, url, {"model": "fake", "prompt": "forbidden"}, **slow))[0] == 400
    assert (await post(http, url, {"model": "fake", "prompt": "spends it"}, **poor))[0] == 200
    assert (await post(http, url, {"model": "fake", "prompt": "too late"}, **poor))[0] == 429

    scraped = await scrape(http, str(gateway.make_url("/metrics")))
    assert value(scraped, "gateway_rate_limited_total", scope="key") == 1
    assert value(scraped, "gateway_budget_exceeded_total") == 1
    # Every prompt but the forbidden one passed the input check, the two refused by a limit too.
    assert value(scraped, "gateway_guardrail_verdicts_total", policy="guarded", check="regex", verdict="pass") == 4
    assert value(scraped, "gateway_guardrail_verdicts_total", policy="guarded", check="regex", verdict="deny") == 1


async def test_promtool_accepts_the_scrape(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus); scripts/test.sh installs it")
    gateway = await make_gateway(cached_config(upstream))
    for stream in (False, True):
        await post(http, str(gateway.make_url("/v1/completions")), {"model": "fake", "prompt": "p", "stream": stream})
    async with http.get(gateway.make_url("/metrics")) as response:
        text = await response.read()
    assert b"gateway_requests_total{" in text

    checked = await asyncio.to_thread(
        subprocess.run, [promtool, "check", "metrics"], input=text, capture_output=True, check=False
    )
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()


async def test_no_secret_reaches_a_label(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {
        "keys": [{"name": "team-a", "key": "${CLIENT_KEY}"}],
        "deployments": [deployment("fake", upstream.base_url, provider={"api_key": "${PROVIDER_KEY}"})],
    }
    gateway = await make_gateway(config, {"CLIENT_KEY": CLIENT_KEY, "PROVIDER_KEY": PROVIDER_KEY})
    url = str(gateway.make_url("/v1/completions"))
    prompt = "my card is 4111 1111 1111 1111"
    assert (await post(http, url, {"model": "fake", "prompt": prompt}, Authorization=f"Bearer {CLIENT_KEY}"))[0] == 200
    assert (await post(http, url, {"model": "fake", "prompt": "x"}, Authorization="Bearer wrong-key-123"))[0] == 401

    async with http.get(gateway.make_url("/metrics")) as response:
        text = await response.text()
    for secret in (CLIENT_KEY, PROVIDER_KEY, "wrong-key-123", "4111 1111", "4111111111111111", "team-a"):
        assert secret not in text
    # The card's first digits in no label (a sample's value, a float, may hold them by chance).
    labels = [f"{name}={value}" for family in text_string_to_metric_families(text) for sample in family.samples
              for name, value in sample.labels.items()]  # fmt: skip
    assert labels
    assert not [label for label in labels if "4111" in label]
    assert 'status_class="4xx"' in text  # the refused request is counted, by nothing that identifies it


async def test_a_bearer_token_guards_the_metrics(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {
        "deployments": [deployment("fake", upstream.base_url)],
        "observability": {"metrics": {"key": "${METRICS_KEY}"}},
    }
    gateway = await make_gateway(config, {"METRICS_KEY": METRICS_KEY})
    for path in ("/metrics", "/dashboard/data"):
        async with http.get(gateway.make_url(path)) as response:
            assert response.status == 401
        async with http.get(gateway.make_url(path), headers={"Authorization": "Bearer nope"}) as response:
            assert response.status == 401
    assert value(await scrape(http, str(gateway.make_url("/metrics")), METRICS_KEY), "gateway_build_info") == 1


async def test_metrics_can_have_a_port_of_their_own(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    from tests.e2e.test_serve_process import free_port

    port = free_port()
    config = {
        "deployments": [deployment("fake", upstream.base_url)],
        "observability": {"metrics": {"port": port, "host": "127.0.0.1"}},
    }
    gateway = await make_gateway(config)
    assert (await post(http, str(gateway.make_url("/v1/completions")), {"model": "fake", "prompt": "x"}))[0] == 200

    async with http.get(gateway.make_url("/metrics")) as response:
        assert response.status == 404  # not on the traffic port
    scraped = await scrape(http, f"http://127.0.0.1:{port}/metrics")
    assert value(scraped, "gateway_requests_total", deployment="fake") == 1


async def test_metrics_can_be_turned_off(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {"deployments": [deployment("fake", upstream.base_url)], "observability": {"metrics": {"enabled": False}}}
    gateway = await make_gateway(config)
    assert (await post(http, str(gateway.make_url("/v1/completions")), {"model": "fake", "prompt": "x"}))[0] == 200
    for path in ("/metrics", "/dashboard"):
        async with http.get(gateway.make_url(path)) as response:
            assert response.status == 404
