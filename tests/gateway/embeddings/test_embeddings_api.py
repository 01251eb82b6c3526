"""`POST /v1/embeddings` through the one pipeline: 400s naming the field (property-based), deployments
that cannot embed (a 400 naming the API and the deployment, `apis:` narrowing), the cache (one upstream
call for the same input list and options), guardrails on the input texts (deny names the input,
redaction changes what is embedded), tpm and cost in input tokens, the `api` label of the metrics
and the access log, and the GenAI `embeddings` span."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.api.embeddings import MAX_INPUTS
from gateway.api.errors import InvalidRequest
from gateway.api.parsing import validate_embeddings
from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream
from tests.support.observability_helpers import log_lines, scrape, value
from tests.support.otlp_receiver import OtlpReceiver

Json = dict[str, Any]


async def post(http: ClientSession, gateway: TestServer, body: Json, **headers: str) -> tuple[int, Any, Any]:
    async with http.post(gateway.make_url("/v1/embeddings"), json=body, headers=headers) as response:
        return response.status, orjson.loads(await response.read()), response.headers


def mock(name: str = "embed", **provider: Any) -> Json:
    return {"name": name, "provider": {"type": "mock", **provider}}


# --- validation ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x"}, "model"),
        ({"model": "m"}, "input"),
        ({"model": "m", "input": ""}, "input"),
        ({"model": "m", "input": []}, "input"),
        ({"model": "m", "input": ["a", ""]}, "input[1]"),
        ({"model": "m", "input": [[1, 2], []]}, "input[1]"),
        ({"model": "m", "input": ["a", [1]]}, "input[1]"),
        ({"model": "m", "input": [1, -2]}, "input[1]"),
        ({"model": "m", "input": [[1], [2, 2**31]]}, "input[1][1]"),
        ({"model": "m", "input": 3}, "input"),
        ({"model": "m", "input": {"text": "a"}}, "input"),
        ({"model": "m", "input": ["a"] * (MAX_INPUTS + 1)}, "input"),
        ({"model": "m", "input": "a", "encoding_format": "int8"}, "encoding_format"),
        ({"model": "m", "input": "a", "dimensions": 0}, "dimensions"),
        ({"model": "m", "input": "a", "dimensions": "8"}, "dimensions"),
        ({"model": "m", "input": "a", "user": 5}, "user"),
    ],
)
def test_bad_bodies_are_400s_naming_the_field(body: Json, param: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        validate_embeddings(body)
    assert refused.value.param == param
    assert param in refused.value.message


_token_lists = st.lists(st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=4), min_size=1, max_size=4)
_inputs = st.one_of(
    st.text(min_size=1),
    st.lists(st.text(min_size=1), min_size=1, max_size=5),
    st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=5),
    _token_lists,
)


@given(_inputs)
def test_every_valid_input_shape_is_accepted_and_split_into_its_inputs(value: Any) -> None:
    inputs = validate_embeddings({"model": "m", "input": value}).inputs()
    expected = 1 if isinstance(value, str) or isinstance(value[0], int) else len(value)
    assert len(inputs) == expected


@given(_inputs, st.integers(0, 3))
def test_an_emptied_element_is_named_exactly(value: Any, position: int) -> None:
    if isinstance(value, str) or isinstance(value[0], int):
        return
    position = position % len(value)
    broken = [*value]
    broken[position] = "" if isinstance(value[0], str) else []
    with pytest.raises(InvalidRequest) as refused:
        validate_embeddings({"model": "m", "input": broken})
    assert refused.value.param == f"input[{position}]"


# --- deployments that cannot embed ----------------------------------------------------------------------------


async def test_a_deployment_that_cannot_embed_is_a_400_naming_the_api_and_the_deployment(
    make_gateway: GatewayFactory, http: ClientSession
) -> None:
    claude = {"name": "claude", "provider": {"type": "anthropic", "api_key": "${KEY}", "model": "claude-x"}}
    narrowed = {**mock("chat-only"), "apis": ["chat"]}
    gateway = await make_gateway({"deployments": [claude, narrowed, mock()]}, {"KEY": "unused"})

    status, error, _ = await post(http, gateway, {"model": "claude", "input": "hi"})
    assert status == 400
    assert error["error"]["code"] == "unsupported_api"
    assert error["error"]["param"] == "model"
    assert "/v1/embeddings" in error["error"]["message"]
    assert "'claude'" in error["error"]["message"]
    assert "provider type 'anthropic'" in error["error"]["message"]

    status, error, _ = await post(http, gateway, {"model": "chat-only", "input": "hi"})
    assert status == 400
    assert "'chat-only'" in error["error"]["message"]
    assert "its `apis` setting" in error["error"]["message"]

    status, answer, _ = await post(http, gateway, {"model": "embed", "input": "hi"})
    assert status == 200
    assert answer["object"] == "list"


async def test_an_embeddings_only_deployment_refuses_chat(make_gateway: GatewayFactory, http: ClientSession) -> None:
    gateway = await make_gateway({"deployments": [{**mock(), "apis": ["embeddings"]}]})
    body = {"model": "embed", "messages": [{"role": "user", "content": "hi"}]}
    async with http.post(gateway.make_url("/v1/chat/completions"), json=body) as response:
        error = await response.json()
    assert response.status == 400
    assert "/v1/chat/completions" in error["error"]["message"]


async def test_dimensions_on_a_model_that_cannot_shorten_is_a_400_naming_it(
    make_gateway: GatewayFactory, http: ClientSession
) -> None:
    gateway = await make_gateway({"deployments": [mock(embedding_shortening=False, embedding_dimensions=8)]})
    status, error, _ = await post(http, gateway, {"model": "embed", "input": "hi", "dimensions": 4})
    assert (status, error["error"]["param"]) == (400, "dimensions")
    status, answer, _ = await post(http, gateway, {"model": "embed", "input": "hi"})
    assert status == 200
    assert len(answer["data"][0]["embedding"]) == 8

    wide = await make_gateway({"deployments": [mock(embedding_dimensions=8)]})
    status, error, _ = await post(http, wide, {"model": "embed", "input": "hi", "dimensions": 9})
    assert (status, error["error"]["param"]) == (400, "dimensions")


# --- cache ------------------------------------------------------------------------------------------------------


async def test_the_same_inputs_and_options_are_one_upstream_call(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    fake = deployment("fake", upstream.base_url, retries=0, policies=["cached"])
    gateway = await make_gateway({"deployments": [fake], "policies": {"cached": {"cache": {"ttl_s": 60}}}})
    body = {"model": "fake", "input": ["alpha", "beta"]}

    first = await post(http, gateway, body)
    again = await post(http, gateway, {**body, "user": "someone-else"})  # who asks changes no vector
    reordered = await post(http, gateway, {**body, "input": ["beta", "alpha"]})
    shortened = await post(http, gateway, {**body, "dimensions": 3})

    assert first[2]["x-gateway-cache-status"] == "MISS"
    assert again[2]["x-gateway-cache-status"] == "HIT"
    assert again[1] == first[1]
    assert reordered[2]["x-gateway-cache-status"] == "MISS"
    assert shortened[2]["x-gateway-cache-status"] == "MISS"
    assert len(upstream.received) == 3


# --- guardrails ---------------------------------------------------------------------------------------------------


async def guarded(make_gateway: GatewayFactory, upstream: FakeUpstream, **policy: Any) -> TestServer:
    fake = deployment("fake", upstream.base_url, retries=0, policies=["guarded"])
    return await make_gateway({"deployments": [fake], "policies": {"guarded": policy}})


async def test_an_input_denied_is_a_400_naming_it_and_nothing_is_embedded(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await guarded(
        make_gateway, upstream, input=[{"check": "words", "words": ["forbidden"], "action": "deny"}]
    )
    status, error, _ = await post(http, gateway, {"model": "fake", "input": ["fine", "a forbidden text"]})
    assert status == 400
    assert error["error"]["type"] == "guardrail_violation"
    assert error["error"]["param"] == "input[1]"
    status, error, _ = await post(http, gateway, {"model": "fake", "input": "ok", "user": "forbidden"})
    assert (status, error["error"]["param"]) == (400, "user")
    assert upstream.received == []


async def test_a_redaction_changes_what_is_embedded(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await guarded(make_gateway, upstream, input=[{"check": "pii", "action": "redact"}])
    status, answer, headers = await post(
        http, gateway, {"model": "fake", "input": ["mail jane.doe@example.com today", "nothing here"]}
    )
    assert status == 200
    sent = upstream.received[0].body["input"]
    assert "jane.doe@example.com" not in sent[0]
    assert sent[1] == "nothing here"
    assert "input.pii=redact" in headers["x-gateway-guardrails"]
    assert answer["data"][0]["embedding"][0] == len(sent[0])  # the vector is the redacted text's


# --- limits, cost, metrics, access log, tracing ---------------------------------------------------------------


async def test_tpm_counts_input_tokens_and_cost_is_per_million_input_tokens(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    price = {"prompt_per_1m": 2.0, "completion_per_1m": 100.0}
    fake = deployment("fake", upstream.base_url, retries=0, limits={"tpm": 100}, price=price)
    gateway = await make_gateway({"deployments": [fake]})

    status, answer, headers = await post(http, gateway, {"model": "fake", "input": ["one two three", "four"]})
    assert status == 200
    assert answer["usage"] == {"prompt_tokens": 4, "total_tokens": 4}
    assert headers["x-gateway-cost-usd"] == "0.000008"  # 4 input tokens at $2 per million

    status, error, _ = await post(http, gateway, {"model": "fake", "input": ["word " * 500]})  # ~625 tokens
    assert (status, error["error"]["code"]) == (429, "request_too_large")
    status, _, _ = await post(http, gateway, {"model": "fake", "input": [list(range(200))]})  # 200 token ids
    assert status == 429
    assert len(upstream.received) == 1


async def test_requests_are_counted_and_logged_with_the_embeddings_api(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path
) -> None:
    path = tmp_path / "access.log"
    gateway = await make_gateway({"deployments": [mock()], "observability": {"access_log": {"path": str(path)}}})
    status, _, _ = await post(http, gateway, {"model": "embed", "input": ["a b", "c"]})
    assert status == 200
    scraped = await scrape(http, str(gateway.make_url("/metrics")))

    labels = {"deployment": "embed", "status_class": "2xx", "api": "embeddings", "stream": "false"}
    assert value(scraped, "gateway_requests_total", **labels) == 1
    assert value(scraped, "gateway_tokens_total", deployment="embed", kind="prompt") == 3
    [line] = await log_lines(path, 1)
    assert (line["api"], line["status"], line["deployment"]) == ("embeddings", 200, "embed")


async def test_an_embeddings_attempt_is_a_genai_embeddings_span(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    receiver: OtlpReceiver,
    http: ClientSession,
) -> None:
    fake = deployment("fake", upstream.base_url, retries=0, provider={"model": "upstream-embedder"})
    tracing = {"enabled": True, "endpoint": receiver.url}
    gateway = await make_gateway({"deployments": [fake], "observability": {"tracing": tracing}})
    status, _, _ = await post(http, gateway, {"model": "fake", "input": "secret text", "encoding_format": "base64"})
    assert status == 200

    await receiver.wait_for(2)
    [span] = receiver.named("embeddings upstream-embedder")
    assert span.attributes["gen_ai.operation.name"] == "embeddings"
    assert span.attributes["gen_ai.request.model"] == "upstream-embedder"
    assert span.attributes["gen_ai.usage.input_tokens"] == 2
    assert "gen_ai.usage.output_tokens" not in span.attributes
    assert "secret text" not in receiver.text()


@pytest.fixture
async def receiver(aiohttp_server: Any, monkeypatch: pytest.MonkeyPatch) -> OtlpReceiver:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
    found = OtlpReceiver()
    found.url = str((await aiohttp_server(found.app())).make_url("")).rstrip("/")
    return found


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=6))
def test_the_estimate_is_input_tokens_only(texts: list[str]) -> None:
    from policies.limits.estimate import CHARS_PER_TOKEN, estimate

    estimated = estimate(validate_embeddings({"model": "m", "input": texts}))
    assert estimated.completion_tokens == 0
    assert estimated.prompt_tokens == sum(-(-len(text) // CHARS_PER_TOKEN) for text in texts)
