"""The built-in `mock` provider, through the gateway with the `openai` SDK: what a user of the quick
start, of a client's CI or of a load test relies on it for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp.test_utils import TestServer

from gateway.app import create_app
from gateway.config.loader import load_config
from tests.conftest import GatewayFactory
from tests.support.observability_helpers import log_lines

ROOT = Path(__file__).resolve().parents[2]


def mock_deployment(name: str = "mock", **provider: Any) -> dict[str, Any]:
    return {"name": name, "retries": 0, "timeout_s": 5, "provider": {"type": "mock", **provider}}


@pytest.fixture
async def client(make_gateway: GatewayFactory) -> AsyncIterator[openai.AsyncOpenAI]:
    server = await make_gateway(
        {"deployments": [mock_deployment(), mock_deployment("fixed", reply="one two three four five six")]}
    )
    async with openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        yield sdk


async def streamed(client: openai.AsyncOpenAI, **request: Any) -> tuple[dict[int, str], dict[int, str], Any]:
    """Texts and finish reasons per choice index, and the usage, of one streamed request."""
    texts: dict[int, str] = {}
    finishes: dict[int, str] = {}
    usage = None
    stream = await client.completions.create(stream=True, stream_options={"include_usage": True}, **request)
    async for chunk in stream:
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
            if choice.finish_reason is not None:
                finishes[choice.index] = choice.finish_reason
        if chunk.usage is not None:
            usage = chunk.usage
    return texts, finishes, usage


async def test_the_shipped_config_answers_with_no_credentials_and_no_other_server(
    aiohttp_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("OPENAI_API_KEY", "VLLM_BASE_URL", "REDIS_URL", "ADMIN_KEY", "METRICS_KEY"):
        monkeypatch.delenv(variable, raising=False)
    server: TestServer = await aiohttp_server(create_app(load_config(str(ROOT / "config.yaml"))))
    async with openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key="anything") as sdk:
        completion = await sdk.completions.create(model="mock", prompt="Say this is a test", max_tokens=16)
        texts, finishes, _ = await streamed(sdk, model="mock", prompt="Count to five:")

    assert completion.choices[0].text.strip()
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 16
    assert completion.usage.prompt_tokens == 5  # Say, this, is, a, test
    assert texts[0].strip()
    assert finishes[0] in {"length", "stop"}


async def test_the_same_request_gets_the_same_text_and_another_prompt_another(client: openai.AsyncOpenAI) -> None:
    first = await client.completions.create(model="mock", prompt="Tell me about tides", max_tokens=12)
    again = await client.completions.create(model="mock", prompt="Tell me about tides", max_tokens=12)
    other = await client.completions.create(model="mock", prompt="Tell me about winds", max_tokens=12)
    seeded = await client.completions.create(model="mock", prompt="Tell me about tides", max_tokens=12, seed=3)

    assert first.choices[0].text == again.choices[0].text
    assert first.choices[0].text != other.choices[0].text
    assert first.choices[0].text != seeded.choices[0].text


async def test_samples_differ_unless_temperature_is_zero(client: openai.AsyncOpenAI) -> None:
    sampled = await client.completions.create(model="mock", prompt="hello", n=3, max_tokens=10, temperature=1)
    greedy = await client.completions.create(model="mock", prompt="hello", n=3, max_tokens=10, temperature=0)

    assert len({choice.text for choice in sampled.choices}) == 3
    assert len({choice.text for choice in greedy.choices}) == 1


@pytest.mark.parametrize(
    "request_fields",
    [
        {"prompt": "Count to five:"},
        {"prompt": "Count to five:", "max_tokens": 40, "seed": 9},
        {"prompt": "Count to five:", "max_tokens": None},
        {"prompt": "Count to five:", "max_tokens": 0},
        {"prompt": ["first prompt", "second, longer prompt"], "n": 2, "max_tokens": 7},
        {"prompt": "Tell a story", "echo": True, "logprobs": 3, "max_tokens": 5},
        {"prompt": [[1, 2, 3], [4, 5]], "max_tokens": 4},
        {"prompt": "Tell a story", "stop": [" the", " a"], "max_tokens": 48},
        {"prompt": "Tell a story", "temperature": 0, "n": 2},
    ],
)
async def test_stream_and_plain_answers_agree(client: openai.AsyncOpenAI, request_fields: dict[str, Any]) -> None:
    plain = await client.completions.create(model="mock", **request_fields)
    texts, finishes, usage = await streamed(client, model="mock", **request_fields)

    assert texts == {choice.index: choice.text for choice in plain.choices}
    assert finishes == {choice.index: choice.finish_reason for choice in plain.choices}
    assert usage == plain.usage


async def test_usage_counts_what_was_produced(client: openai.AsyncOpenAI) -> None:
    cut = await client.completions.create(model="mock", prompt="a b c", max_tokens=5)
    natural = await client.completions.create(model="mock", prompt="a b c", max_tokens=None)
    token_ids = await client.completions.create(model="mock", prompt=[[7, 8, 9, 10], [11]], max_tokens=2)
    best_of = await client.completions.create(model="mock", prompt="a b c", max_tokens=4, best_of=3)

    assert (cut.choices[0].finish_reason, cut.usage and cut.usage.completion_tokens) == ("length", 5)
    assert len(cut.choices[0].text.split()) == 5
    assert natural.choices[0].finish_reason == "stop"
    assert natural.usage is not None
    assert natural.usage.completion_tokens == len(natural.choices[0].text.split())
    assert token_ids.usage is not None
    assert token_ids.usage.prompt_tokens == 5
    assert best_of.usage is not None
    assert len(best_of.choices) == 1
    assert best_of.usage.completion_tokens == 3 * 4  # every best_of sample is generated, as OpenAI bills it


async def test_a_fixed_reply_is_cut_by_max_tokens_and_stop(client: openai.AsyncOpenAI) -> None:
    whole = await client.completions.create(model="fixed", prompt="x", max_tokens=100)
    short = await client.completions.create(model="fixed", prompt="x", max_tokens=2)
    stopped = await client.completions.create(model="fixed", prompt="x", stop=" four", max_tokens=100)

    assert (whole.choices[0].text, whole.choices[0].finish_reason) == ("one two three four five six", "stop")
    assert (short.choices[0].text, short.choices[0].finish_reason) == ("one two", "length")
    assert (stopped.choices[0].text, stopped.choices[0].finish_reason) == ("one two three", "stop")
    assert stopped.usage is not None
    assert stopped.usage.completion_tokens == 4  # " four" was generated, then cut


async def test_echo_and_logprobs_describe_the_text(client: openai.AsyncOpenAI) -> None:
    completion = await client.completions.create(
        model="mock", prompt="Once upon a time", echo=True, logprobs=2, max_tokens=6
    )
    choice = completion.choices[0]

    assert choice.text.startswith("Once upon a time ")
    assert choice.logprobs is not None
    assert "".join(choice.logprobs.tokens or []) == choice.text
    assert (choice.logprobs.token_logprobs or [])[0] is None  # the first prompt token has no context
    assert all(len(top) == 2 for top in (choice.logprobs.top_logprobs or [])[1:])
    tokens = choice.logprobs.tokens or []
    assert choice.logprobs.text_offset == [len("".join(tokens[:position])) for position in range(len(tokens))]


async def test_every_completions_field_and_unknown_ones_are_accepted(client: openai.AsyncOpenAI) -> None:
    completion = await client.completions.create(
        model="mock",
        prompt="hi",
        suffix=" bye",
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        logit_bias={"50256": -100},
        user="u-1",
        top_p=0.9,
        extra_body={"top_k": 5, "repetition_penalty": 1.1},
    )

    assert completion.choices[0].text


async def test_failures_look_like_an_upstreams(make_gateway: GatewayFactory) -> None:
    server = await make_gateway(
        {
            "deployments": [
                mock_deployment("down", error_rate=1),
                mock_deployment("busy", error_rate=1, error_status=429),
                {**mock_deployment("slow", latency_ms=60_000), "timeout_s": 0.1},
            ]
        }
    )
    async with openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        with pytest.raises(openai.APIStatusError) as down:
            await sdk.completions.create(model="down", prompt="hi")
        with pytest.raises(openai.RateLimitError) as busy:
            await sdk.completions.create(model="busy", prompt="hi")
        with pytest.raises(openai.APIStatusError) as slow:
            await sdk.completions.create(model="slow", prompt="hi")

    assert (down.value.status_code, down.value.code) == (502, "upstream_http_error")
    assert "HTTP 503" in down.value.message
    assert busy.value.response.headers["retry-after"] == "1"
    assert slow.value.status_code == 504


async def test_a_share_of_failures_is_retried_to_success(make_gateway: GatewayFactory) -> None:
    flaky = {**mock_deployment("flaky", error_rate=0.5, seed=1), "retries": 10}
    routing = {"max_attempts": 11, "backoff": {"initial_s": 0, "max_s": 0}, "breaker": {"enabled": False}}
    server = await make_gateway({"routing": routing, "deployments": [flaky]})
    async with openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        attempts = []
        for _ in range(10):
            raw = await sdk.completions.with_raw_response.create(model="flaky", prompt="hi", max_tokens=2)
            attempts.append(int(raw.headers["x-gateway-attempts"]))

    assert sum(attempts) > 10  # some calls failed and were retried…
    assert all(count >= 1 for count in attempts)  # …and every request was answered


async def test_a_stream_is_metered_as_the_plain_answer_without_a_usage_chunk(
    make_gateway: GatewayFactory, tmp_path: Path
) -> None:
    """Echoed prompts and text cut at a stop make one-token-per-event the wrong count: the gateway
    meters the mock's stream by its own figures, as it does the local engine's."""
    log = tmp_path / "access.log"
    server = await make_gateway(
        {"deployments": [mock_deployment()], "observability": {"access_log": {"path": str(log)}}}
    )
    request: dict[str, Any] = {"model": "mock", "prompt": "one two three", "echo": True, "stop": [" the"]}
    async with openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        plain = await sdk.completions.create(max_tokens=30, **request)
        async for _ in await sdk.completions.create(max_tokens=30, stream=True, **request):
            pass
    lines = await log_lines(log, 2)

    assert plain.usage is not None
    metered = [(line["prompt_tokens"], line["completion_tokens"]) for line in lines]
    assert metered == [(plain.usage.prompt_tokens, plain.usage.completion_tokens)] * 2
