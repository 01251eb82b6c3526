"""Every validation rule of `POST /v1/completions`, over real HTTP to the gateway.

A violation is a 400 OpenAI error envelope (`invalid_request_error`) whose `param` names the
field and whose message mentions it, and nothing reaches the upstream. An accepted request is a
200 and the upstream receives the body exactly as the client sent it: no defaults injected,
unknown fields (vLLM's `top_k`, …) kept.
"""

from __future__ import annotations

from typing import Any

import openai
import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.support.fake_upstream import FakeUpstream

PATH = "/v1/completions"
BASE: dict[str, Any] = {"model": "fake", "prompt": "Say this is a test"}


async def post(gateway: TestServer, http: ClientSession, payload: dict[str, Any]) -> tuple[int, str, bytes]:
    async with http.post(gateway.make_url(PATH), json=payload) as response:
        return response.status, response.content_type, await response.read()


async def assert_rejected(
    gateway: TestServer, http: ClientSession, upstream: FakeUpstream, payload: dict[str, Any], param: str
) -> dict[str, Any]:
    status, content_type, raw = await post(gateway, http, payload)

    assert status == 400, raw
    assert content_type == "application/json"
    body = orjson.loads(raw)
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert param in error["message"]
    assert upstream.received == []
    return error


async def assert_accepted(
    gateway: TestServer, http: ClientSession, upstream: FakeUpstream, payload: dict[str, Any]
) -> None:
    status, content_type, raw = await post(gateway, http, payload)

    assert status == 200, raw
    if payload.get("stream"):
        assert content_type == "text/event-stream"
        assert raw.rstrip().endswith(b"data: [DONE]")
    else:
        assert orjson.loads(raw)["object"] == "text_completion"
    assert len(upstream.received) == 1
    assert upstream.received[0].path == PATH
    assert upstream.received[0].body == payload  # unchanged: nothing added, dropped or coerced


# --- model ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({"model": 5, "prompt": "hi"}, id="model-not-a-string"),
        pytest.param({"model": ["fake"], "prompt": "hi"}, id="model-an-array"),
        pytest.param({"model": None, "prompt": "hi"}, id="model-null"),
        pytest.param({"model": "", "prompt": "hi"}, id="model-empty"),
    ],
)
async def test_model_must_be_a_non_empty_string(
    gateway: TestServer, http: ClientSession, upstream: FakeUpstream, payload: dict[str, Any]
) -> None:
    await assert_rejected(gateway, http, upstream, payload, "model")


async def test_missing_model_says_it_is_required(
    gateway: TestServer, http: ClientSession, upstream: FakeUpstream
) -> None:
    error = await assert_rejected(gateway, http, upstream, {"prompt": "hi"}, "model")

    assert "Missing required parameter" in error["message"]


# --- prompt --------------------------------------------------------------------------------------


async def test_prompt_is_required(gateway: TestServer, http: ClientSession, upstream: FakeUpstream) -> None:
    error = await assert_rejected(gateway, http, upstream, {"model": "fake"}, "prompt")

    assert "Missing required parameter" in error["message"]


@pytest.mark.parametrize(
    "prompt",
    [
        pytest.param("Say this is a test", id="prompt-string"),
        pytest.param(["first prompt", "second prompt"], id="prompt-list-of-strings"),
        pytest.param([1212, 318, 257, 1332], id="prompt-list-of-token-ids"),
        pytest.param([[1212, 318], [257, 1332, 0]], id="prompt-list-of-token-id-lists"),
        pytest.param(None, id="prompt-null-means-endoftext"),
    ],
)
async def test_prompt_valid_forms_reach_the_upstream_unchanged(
    gateway: TestServer, http: ClientSession, upstream: FakeUpstream, prompt: Any
) -> None:
    await assert_accepted(gateway, http, upstream, {"model": "fake", "prompt": prompt})

    assert upstream.received[0].body["prompt"] == prompt


@pytest.mark.parametrize(
    "prompt",
    [
        pytest.param([], id="prompt-empty-list"),
        pytest.param(["text", 42], id="prompt-mixed-list"),
        pytest.param([1, -1], id="prompt-negative-token-id"),
        pytest.param([[1, 2], []], id="prompt-empty-inner-list"),
        pytest.param([[]], id="prompt-only-an-empty-inner-list"),
        pytest.param([[1, 2], 3], id="prompt-mixed-ids-and-id-lists"),
        pytest.param([True, False], id="prompt-booleans-as-token-ids"),
        pytest.param([1.5], id="prompt-float-token-id"),
        pytest.param([["nested", "strings"]], id="prompt-list-of-string-lists"),
        pytest.param(42, id="prompt-a-number"),
        pytest.param({"text": "hi"}, id="prompt-an-object"),
    ],
)
async def test_prompt_invalid_forms_are_rejected(
    gateway: TestServer, http: ClientSession, upstream: FakeUpstream, prompt: Any
) -> None:
    await assert_rejected(gateway, http, upstream, {"model": "fake", "prompt": prompt}, "prompt")


# --- ranges and types: every field, both sides of every bound ------------------------------------

REJECTED = [
    # best_of: 0..20, >= n, and not with stream
    pytest.param({"best_of": 21}, "best_of", id="best_of:21-above-20"),
    pytest.param({"best_of": -1}, "best_of", id="best_of:-1-below-0"),
    pytest.param({"best_of": 2, "n": 3}, "best_of", id="best_of:2-below-n-3"),
    pytest.param({"best_of": 0}, "best_of", id="best_of:0-below-default-n-1"),
    pytest.param({"best_of": 2, "stream": True}, "best_of", id="best_of:2-with-stream"),
    # logprobs: 0..5
    pytest.param({"logprobs": 6}, "logprobs", id="logprobs:6-above-5"),
    pytest.param({"logprobs": -1}, "logprobs", id="logprobs:-1-below-0"),
    # n: 1..128
    pytest.param({"n": 0}, "n", id="n:0-below-1"),
    pytest.param({"n": 129}, "n", id="n:129-above-128"),
    # penalties: -2..2
    pytest.param({"frequency_penalty": 2.5}, "frequency_penalty", id="frequency_penalty:2.5-above-2"),
    pytest.param({"frequency_penalty": -2.5}, "frequency_penalty", id="frequency_penalty:-2.5-below--2"),
    pytest.param({"presence_penalty": 2.5}, "presence_penalty", id="presence_penalty:2.5-above-2"),
    pytest.param({"presence_penalty": -2.5}, "presence_penalty", id="presence_penalty:-2.5-below--2"),
    # logit_bias: token-id keys, values -100..100
    pytest.param({"logit_bias": {"50256": 101}}, "logit_bias", id="logit_bias:value-101-above-100"),
    pytest.param({"logit_bias": {"50256": -101}}, "logit_bias", id="logit_bias:value--101-below--100"),
    pytest.param({"logit_bias": {"abc": 1}}, "logit_bias", id="logit_bias:key-abc-not-a-token-id"),
    pytest.param({"logit_bias": {"-1": 1}}, "logit_bias", id="logit_bias:key--1-negative"),
    pytest.param({"logit_bias": {"²": 1}}, "logit_bias", id="logit_bias:key-superscript-two-not-a-token-id"),
    # seed: int64
    pytest.param({"seed": 2**63}, "seed", id="seed:2**63-above-int64"),
    pytest.param({"seed": -(2**63) - 1}, "seed", id="seed:-(2**63)-1-below-int64"),
    # stop: a string or 1..4 strings
    pytest.param({"stop": ["a", "b", "c", "d", "e"]}, "stop", id="stop:5-strings"),
    pytest.param({"stop": []}, "stop", id="stop:empty-list"),
    pytest.param({"stop": [1]}, "stop", id="stop:list-of-number"),
    pytest.param({"stop": 1}, "stop", id="stop:a-number"),
    # stream_options: only with stream true
    pytest.param({"stream_options": {"include_usage": True}}, "stream_options", id="stream_options:without-stream"),
    pytest.param(
        {"stream_options": {"include_usage": True}, "stream": False},
        "stream_options",
        id="stream_options:with-stream-false",
    ),
    # temperature 0..2, top_p 0..1, max_tokens >= 0
    pytest.param({"temperature": 2.1}, "temperature", id="temperature:2.1-above-2"),
    pytest.param({"temperature": -0.1}, "temperature", id="temperature:-0.1-below-0"),
    pytest.param({"top_p": 1.1}, "top_p", id="top_p:1.1-above-1"),
    pytest.param({"top_p": -0.1}, "top_p", id="top_p:-0.1-below-0"),
    pytest.param({"max_tokens": -1}, "max_tokens", id="max_tokens:-1-below-0"),
    # strict types: no string-to-number, number-to-boolean or boolean-to-integer coercion
    pytest.param({"max_tokens": "16"}, "max_tokens", id="type:max_tokens-string-16"),
    pytest.param({"max_tokens": 16.5}, "max_tokens", id="type:max_tokens-float"),
    pytest.param({"echo": 1}, "echo", id="type:echo-number-1"),
    pytest.param({"stream": "true"}, "stream", id="type:stream-string-true"),
    pytest.param({"temperature": "x"}, "temperature", id="type:temperature-string-x"),
    pytest.param({"n": True}, "n", id="type:n-boolean"),
    pytest.param({"suffix": 5}, "suffix", id="type:suffix-number"),
    pytest.param({"user": 5}, "user", id="type:user-number"),
]


@pytest.mark.parametrize(("extra", "param"), REJECTED)
async def test_violation_is_a_400_naming_the_field_and_nothing_reaches_the_upstream(
    gateway: TestServer, http: ClientSession, upstream: FakeUpstream, extra: dict[str, Any], param: str
) -> None:
    error = await assert_rejected(gateway, http, upstream, {**BASE, **extra}, param)

    assert error["message"].startswith(f"Invalid '{param}'")


ACCEPTED = [
    pytest.param({"best_of": 1}, id="best_of:1"),
    pytest.param({"best_of": 20}, id="best_of:20-max"),
    pytest.param({"best_of": 3, "n": 3}, id="best_of:3-equal-to-n"),
    pytest.param({"best_of": 1, "stream": True}, id="best_of:1-with-stream"),
    pytest.param({"logprobs": 0}, id="logprobs:0-min"),
    pytest.param({"logprobs": 5}, id="logprobs:5-max"),
    pytest.param({"n": 1}, id="n:1-min"),
    pytest.param({"n": 128, "best_of": None}, id="n:128-max-best_of-null"),
    pytest.param({"n": 2}, id="n:2-without-best_of"),
    pytest.param({"n": 128}, id="n:128-without-best_of"),
    pytest.param({"frequency_penalty": 2}, id="frequency_penalty:2-max"),
    pytest.param({"frequency_penalty": -2.0}, id="frequency_penalty:-2-min"),
    pytest.param({"presence_penalty": 2.0}, id="presence_penalty:2-max"),
    pytest.param({"presence_penalty": -2}, id="presence_penalty:-2-min"),
    pytest.param({"logit_bias": {"50256": -100, "1": 100, "2": 0.5}}, id="logit_bias:values-at-bounds"),
    pytest.param({"logit_bias": {}}, id="logit_bias:empty-object"),
    pytest.param({"seed": -(2**63)}, id="seed:-(2**63)-min"),
    pytest.param({"seed": 2**63 - 1}, id="seed:2**63-1-max"),
    pytest.param({"stop": "\n"}, id="stop:a-string"),
    pytest.param({"stop": ["a"]}, id="stop:1-string"),
    pytest.param({"stop": ["a", "b", "c", "d"]}, id="stop:4-strings"),
    pytest.param({"stream": True, "stream_options": {"include_usage": True}}, id="stream_options:with-stream"),
    pytest.param({"temperature": 0}, id="temperature:0-min"),
    pytest.param({"temperature": 2}, id="temperature:2-max-as-integer"),
    pytest.param({"top_p": 0.0}, id="top_p:0-min"),
    pytest.param({"top_p": 1}, id="top_p:1-max"),
    pytest.param({"max_tokens": 0}, id="max_tokens:0-min"),
    pytest.param({"max_tokens": 16}, id="max_tokens:16"),
    pytest.param({"echo": True}, id="echo:true"),
    pytest.param({"suffix": " and that is all."}, id="suffix:a-string"),
    pytest.param({"user": "user-1234"}, id="user:a-string"),
]


@pytest.mark.parametrize("extra", ACCEPTED)
async def test_value_within_bounds_is_forwarded_unchanged(
    gateway: TestServer, http: ClientSession, upstream: FakeUpstream, extra: dict[str, Any]
) -> None:
    await assert_accepted(gateway, http, upstream, {**BASE, **extra})


# --- what the schema does not know, and nulls ----------------------------------------------------


async def test_unknown_fields_reach_the_upstream_untouched(
    gateway: TestServer, http: ClientSession, upstream: FakeUpstream
) -> None:
    vllm = {
        "top_k": 5,
        "repetition_penalty": 1.1,
        "min_p": 0.05,
        "guided_choice": ["yes", "no"],
        "extra_body_like": {"nested": [1, {"deep": None}]},
    }

    await assert_accepted(gateway, http, upstream, {**BASE, **vllm})

    received = upstream.received[0].body
    assert received["top_k"] == 5
    assert received["repetition_penalty"] == 1.1
    assert {key: received[key] for key in vllm} == vllm


OPTIONAL_FIELDS = [
    "best_of",
    "echo",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "max_tokens",
    "n",
    "presence_penalty",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "suffix",
    "temperature",
    "top_p",
    "user",
]


@pytest.mark.parametrize("field", OPTIONAL_FIELDS)
async def test_null_optional_field_is_accepted(
    gateway: TestServer, http: ClientSession, upstream: FakeUpstream, field: str
) -> None:
    await assert_accepted(gateway, http, upstream, {**BASE, field: None})


async def test_every_optional_field_null_at_once_is_accepted(
    gateway: TestServer, http: ClientSession, upstream: FakeUpstream
) -> None:
    await assert_accepted(gateway, http, upstream, {**BASE, **dict.fromkeys(OPTIONAL_FIELDS)})


# --- through the official SDK --------------------------------------------------------------------


async def test_sdk_raises_bad_request_naming_the_field(client: openai.AsyncOpenAI, upstream: FakeUpstream) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.completions.create(model="fake", prompt="hi", temperature=2.5)

    assert caught.value.status_code == 400
    assert caught.value.param == "temperature"
    assert caught.value.type == "invalid_request_error"
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["param"] == "temperature"
    assert "temperature" in body["message"]
    assert upstream.received == []
