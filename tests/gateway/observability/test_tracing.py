"""OpenTelemetry traces, exported over OTLP/HTTP to a real receiver on loopback: one server span per
request, a GenAI span per upstream attempt, the caller's trace as their parent, the attempt's
`traceparent` on the upstream call, no content unless asked (and then redacted), nothing at all when
tracing is off, and a dead collector that costs only a counter."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import ClientSession
from pytest_aiohttp import AiohttpServer

from gateway.config.observability import TracingConfig
from gateway.observability.tracing import tracing_wanted
from tests.conftest import GatewayFactory, deployment, upstream_url
from tests.support.fake_upstream import FakeUpstream, status, stream
from tests.support.observability_helpers import scrape, value
from tests.support.otlp_receiver import OtlpReceiver

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
SERVER, CLIENT = 2, 3


@pytest.fixture
async def receiver(aiohttp_server: AiohttpServer, monkeypatch: pytest.MonkeyPatch) -> OtlpReceiver:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")  # export within milliseconds, not the SDK's 5 s
    found = OtlpReceiver()
    found.url = str((await aiohttp_server(found.app())).make_url("")).rstrip("/")
    return found


def traced_config(upstream: FakeUpstream, receiver_url: str, **tracing: Any) -> dict[str, Any]:
    fake = deployment("fake", upstream_url(upstream), timeout_s=2, retries=1, provider={"model": "upstream-model"})
    return {
        "deployments": [fake],
        "routing": {"backoff": {"initial_s": 0.001, "max_s": 0.001}},
        "observability": {"tracing": {"enabled": True, "endpoint": receiver_url, **tracing}},
    }


async def test_a_request_is_a_server_span_with_one_genai_span_per_attempt_under_the_callers_trace(
    make_gateway: GatewayFactory, upstream: FakeUpstream, receiver: OtlpReceiver, http: ClientSession
) -> None:
    gateway = await make_gateway(traced_config(upstream, receiver.url))
    upstream.script(status(503))  # the first attempt fails, the retry answers
    body = {"model": "fake", "prompt": "secret prompt text", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9}
    headers = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01", "tracestate": "vendor=abc"}

    async with http.post(gateway.make_url("/v1/completions"), json=body, headers=headers) as response:
        assert response.status == 200
        answer = await response.json()
        assert response.headers["x-gateway-trace-id"] == CALLER_TRACE

    spans = await receiver.wait_for(3)
    (server,) = [span for span in spans if span.kind == SERVER]
    attempts = receiver.named("text_completion upstream-model")
    assert len(attempts) == 2
    assert server.name == "POST /v1/completions"
    assert (server.trace_id, server.parent_span_id) == (CALLER_TRACE, CALLER_SPAN)
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["gateway.deployment"] == "fake"
    assert server.attributes["gateway.attempts"] == 2
    assert server.attributes["gateway.limits"] == "admitted"
    assert server.resource["service.name"] == "llm-gateway"
    assert server.resource["service.instance.id"]
    failed, answered = sorted(attempts, key=lambda span: span.attributes["gateway.attempt"])
    for span in attempts:
        assert (span.kind, span.trace_id, span.parent_span_id) == (CLIENT, CALLER_TRACE, server.span_id)
        assert span.attributes["gen_ai.operation.name"] == "text_completion"
        assert span.attributes["gen_ai.provider.name"] == "openai"
        assert span.attributes["gen_ai.request.model"] == "upstream-model"
        assert span.attributes["gen_ai.request.max_tokens"] == 7
        assert span.attributes["gen_ai.request.temperature"] == 0.5
        assert span.attributes["gen_ai.request.top_p"] == 0.9
        assert span.attributes["server.address"] == "127.0.0.1"
        assert isinstance(span.attributes["server.port"], int)
        assert span.attributes["gateway.deployment"] == "fake"
    assert failed.attributes["error.type"] == "upstream_http_error"
    assert failed.status_code == 2
    assert answered.attributes["gen_ai.response.id"] == answer["id"]
    assert answered.attributes["gen_ai.response.model"] == "upstream-model"
    assert answered.attributes["gen_ai.response.finish_reasons"] == ["length"]
    assert answered.attributes["gen_ai.usage.input_tokens"] == answer["usage"]["prompt_tokens"]
    assert answered.attributes["gen_ai.usage.output_tokens"] == answer["usage"]["completion_tokens"]
    assert "error.type" not in answered.attributes
    # Each upstream call carried its own attempt's traceparent, and the caller's tracestate.
    sent = [received.headers["traceparent"] for received in upstream.received]
    assert sent == [f"00-{CALLER_TRACE}-{span.span_id}-01" for span in (failed, answered)]
    assert {received.headers["tracestate"] for received in upstream.received} == {"vendor=abc"}
    # No content by default: neither the prompt nor the completion is anywhere in the export.
    assert "secret prompt text" not in receiver.text()
    assert not any(key.startswith("gen_ai.input") or key.startswith("gen_ai.output") for key in answered.attributes)


async def test_a_stream_attempt_records_its_first_token_and_ends_with_the_stream(
    make_gateway: GatewayFactory, upstream: FakeUpstream, receiver: OtlpReceiver, http: ClientSession
) -> None:
    gateway = await make_gateway(traced_config(upstream, receiver.url))
    upstream.script(stream(["Hello", " world"]))
    body = {"model": "fake", "prompt": "hi", "stream": True, "stream_options": {"include_usage": True}}

    async with http.post(gateway.make_url("/v1/completions"), json=body) as response:
        assert response.status == 200
        trace_id = response.headers["x-gateway-trace-id"]
        await response.read()

    spans = await receiver.wait_for(2)
    (server,) = [span for span in spans if span.kind == SERVER]
    (attempt,) = receiver.named("text_completion upstream-model")
    assert server.trace_id == attempt.trace_id == trace_id
    assert server.parent_span_id == ""  # no caller trace: a root
    assert [name for name, _ in attempt.events] == ["gen_ai.first_token"]
    assert "gateway.first_byte" in [name for name, _ in server.events]
    assert attempt.attributes["gen_ai.response.finish_reasons"]


async def test_cache_hits_guardrail_denials_and_rate_limits_are_visible_on_the_server_span(
    make_gateway: GatewayFactory, upstream: FakeUpstream, receiver: OtlpReceiver, http: ClientSession
) -> None:
    config = traced_config(upstream, receiver.url)
    config["deployments"][0].update(policies=["p"], limits={"rpm": 2})
    config["policies"] = {"p": {"cache": {}, "input": [{"check": "regex", "pattern": "forbidden", "action": "deny"}]}}
    gateway = await make_gateway(config)
    url = gateway.make_url("/v1/completions")

    statuses = []
    for prompt in ("same", "same", "forbidden words", "other"):
        async with http.post(url, json={"model": "fake", "prompt": prompt, "temperature": 0}) as response:
            statuses.append(response.status)
            assert response.headers.get("x-gateway-trace-id")  # error envelopes name their trace too
    assert statuses == [200, 200, 400, 429]

    spans = await receiver.wait_for(5)  # 4 server spans, 1 upstream attempt
    servers = sorted(
        (span for span in spans if span.kind == SERVER), key=lambda span: span.attributes["gateway.request_id"]
    )
    by_status = {span.attributes["http.response.status_code"]: span for span in servers}
    hit = next(span for span in servers if span.attributes.get("gateway.cache.status") == "hit")
    assert "gateway.cache.hit" in [name for name, _ in hit.events]
    denied = by_status[400]
    assert (
        "gateway.guardrail.denied",
        {"gateway.guardrail.policy": "p", "gateway.guardrail.stage": "input", "gateway.guardrail.check": "regex"},
    ) in denied.events
    limited = by_status[429]
    assert limited.attributes["gateway.limits"] == "rate_limited.deployment"
    assert [name for name, _ in limited.events] == ["gateway.rate_limited"]
    assert len(receiver.named("text_completion upstream-model")) == 1  # the hit made no upstream call


async def test_captured_content_is_pii_redacted(
    make_gateway: GatewayFactory, upstream: FakeUpstream, receiver: OtlpReceiver, http: ClientSession
) -> None:
    gateway = await make_gateway(traced_config(upstream, receiver.url, capture_content=True))
    body = {"model": "fake", "prompt": "mail jane.doe@example.com about it"}

    async with http.post(gateway.make_url("/v1/completions"), json=body) as response:
        assert response.status == 200

    await receiver.wait_for(2)
    (attempt,) = receiver.named("text_completion upstream-model")
    assert "about it" in attempt.attributes["gen_ai.input.messages"]
    assert "about it" in attempt.attributes["gen_ai.output.messages"]  # the fake echoes the prompt
    assert "jane.doe@example.com" not in receiver.text()


@pytest.mark.parametrize("setting", ["unset", "disabled"])
async def test_nothing_is_traced_or_exported_with_tracing_off(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    receiver: OtlpReceiver,
    http: ClientSession,
    monkeypatch: pytest.MonkeyPatch,
    setting: str,
) -> None:
    config = traced_config(upstream, receiver.url)
    if setting == "unset":
        del config["observability"]
    else:  # off in the config wins over an endpoint in the environment
        config["observability"]["tracing"]["enabled"] = False
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    gateway = await make_gateway(config)
    headers = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}

    for streamed in (False, True):
        async with http.post(
            gateway.make_url("/v1/completions"),
            json={"model": "fake", "prompt": "x", "stream": streamed},
            headers=headers,
        ) as response:
            assert response.status == 200
            assert "x-gateway-trace-id" not in response.headers
            await response.read()

    await asyncio.sleep(0.3)  # many export delays
    assert receiver.raw == []
    assert all("traceparent" not in received.headers for received in upstream.received)


def test_the_environment_turns_tracing_on_only_where_the_config_says_nothing() -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    assert tracing_wanted(TracingConfig(), endpoint)
    assert not tracing_wanted(TracingConfig(), {})
    assert not tracing_wanted(TracingConfig(), {**endpoint, "OTEL_SDK_DISABLED": "true"})
    assert not tracing_wanted(TracingConfig(enabled=False), endpoint)
    assert tracing_wanted(TracingConfig(enabled=True), {})


async def test_a_dead_collector_costs_only_a_counter(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    monkeypatch: pytest.MonkeyPatch,
    unused_tcp_port: int,
) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.5")
    gateway = await make_gateway(traced_config(upstream, f"http://127.0.0.1:{unused_tcp_port}"))

    for _ in range(3):
        async with http.post(gateway.make_url("/v1/completions"), json={"model": "fake", "prompt": "x"}) as response:
            assert response.status == 200

    for _ in range(600):  # 30 s at least: a bound for a hang, the exporter fails within moments
        if value(await scrape(http, str(gateway.make_url("/metrics"))), "gateway_trace_export_errors_total") >= 1:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("no failed export was counted")


def test_the_compose_stack_sends_the_gateways_traces_through_a_collector_to_jaeger() -> None:
    """Offline (no docker daemon here): the gateway exports to the collector, which receives OTLP/HTTP
    and exports to Jaeger, whose UI is published."""
    root = Path(__file__).resolve().parents[3]
    compose = yaml.safe_load((root / "docker-compose.yml").read_text())
    services = compose["services"]
    environment = services["gateway"]["environment"]
    collector_config = next(v.split(":")[0] for v in services["otel-collector"]["volumes"])
    collector = yaml.safe_load((root / collector_config).read_text())

    assert environment["OTEL_EXPORTER_OTLP_ENDPOINT"] == "${OTEL_EXPORTER_OTLP_ENDPOINT:-http://otel-collector:4318}"
    assert tracing_wanted(TracingConfig(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector:4318"})
    assert collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
    (exporter,) = collector["service"]["pipelines"]["traces"]["exporters"]
    assert collector["exporters"][exporter]["endpoint"] == "jaeger:4317"
    assert "16686:16686" in services["jaeger"]["ports"]
    assert services["jaeger"]["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"
