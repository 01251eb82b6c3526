"""The conformance suite for the Chat Completions API: whatever API a deployment speaks upstream,
its provider answers a chat request (`api="chat"`) with the `chat.completion` (or the
`chat.completion.chunk` stream) the `openai` SDK parses, plain, streamed, with tools, stop, length,
usage and errors alike. Providers are called directly (the pipeline's chat route is tested apart);
a provider that does not declare chat in its `apis` is skipped. An `openai` or `azure` deployment
with `responses: native` (another provider class) serves chat as the others do."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from gateway.api.errors import GatewayError
from providers.base import Provider, UpstreamRequest
from providers.registry import PROVIDER_TYPES
from tests.conformance.cases import CASES, NATIVE_RESPONSES, ProviderCase
from tests.conformance.conftest import DEPLOYMENT, cases, needs
from tests.conformance.fake_api import PROVIDER_KEY, Fail, FakeAPI, tool_arguments

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
QUESTION = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "the sky"}]

case = cases([*CASES, *NATIVE_RESPONSES])


@pytest.fixture
async def provider(case: ProviderCase, fake: FakeAPI) -> AsyncIterator[Provider]:
    block = dict(case.provider(fake))
    kind = PROVIDER_TYPES[block.pop("type")]
    credential = None
    if "api_key" in block:
        block["api_key"] = credential = PROVIDER_KEY
    created = kind.create(DEPLOYMENT, kind.options.model_validate(block), credential)
    try:
        if "chat" not in getattr(created, "apis", frozenset({"completions"})):
            pytest.skip(f"the {case.type} provider does not serve chat (yet)")
        yield created
    finally:
        await created.aclose()


async def chat(provider: Provider, **body: Any) -> ChatCompletion:
    result = await provider.complete(_request(body))
    return ChatCompletion.model_validate(result.body)


async def chat_stream(provider: Provider, **body: Any) -> list[ChatCompletionChunk]:
    stream = await provider.stream(_request({**body, "stream": True}))
    chunks = []
    try:
        async for payloads in stream:
            chunks += [ChatCompletionChunk.model_validate_json(payload) for payload in payloads]
    finally:
        await stream.aclose()
    return chunks


def _request(body: dict[str, Any]) -> UpstreamRequest:
    return UpstreamRequest({"model": "conf-model", "messages": QUESTION, **body}, "req-chat", 10.0, api="chat")


def joined(chunks: list[ChatCompletionChunk]) -> tuple[dict[int, str], dict[int, str], dict[int, dict[int, Any]]]:
    """Each choice's text, finish reason and tool calls (by tool-call index), from the deltas."""
    texts: dict[int, str] = defaultdict(str)
    finishes: dict[int, str] = {}
    calls: dict[int, dict[int, Any]] = defaultdict(dict)
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
            if choice.finish_reason is not None:
                finishes[choice.index] = choice.finish_reason
            for delta in choice.delta.tool_calls or []:
                call = calls[choice.index].setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = call["id"] or delta.id
                if delta.function is not None:
                    call["name"] += delta.function.name or ""
                    call["arguments"] += delta.function.arguments or ""
    return dict(texts), finishes, dict(calls)


async def test_plain_chat(provider: Provider, fake: FakeAPI) -> None:
    completion = await chat(provider)

    expected = fake.generate("the sky")
    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl")
    [choice] = completion.choices
    assert (choice.index, choice.message.role, choice.message.content) == (0, "assistant", expected.text)
    assert choice.finish_reason == "stop"
    assert choice.message.tool_calls is None
    assert completion.usage is not None
    assert completion.usage.completion_tokens == len(expected.pieces)
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens


async def test_streamed_chat_with_usage(provider: Provider, fake: FakeAPI) -> None:
    chunks = await chat_stream(provider, stream_options={"include_usage": True})

    expected = fake.generate("the sky")
    texts, finishes, _ = joined(chunks)
    assert (texts, finishes) == ({0: expected.text}, {0: "stop"})
    assert {chunk.object for chunk in chunks} == {"chat.completion.chunk"}
    assert len({chunk.id for chunk in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == len(expected.pieces)


async def test_stream_has_no_usage_unless_asked(provider: Provider) -> None:
    chunks = await chat_stream(provider)

    assert joined(chunks)[1] == {0: "stop"}
    assert all(chunk.usage is None and chunk.choices for chunk in chunks)


async def answer(provider: Provider, stream: bool, **body: Any) -> tuple[str, str]:
    """The one choice's text and finish reason, from a plain answer or a stream."""
    if stream:
        texts, finishes, _ = joined(await chat_stream(provider, **body))
        return texts[0], finishes[0]
    completion = await chat(provider, **body)
    return str(completion.choices[0].message.content), str(completion.choices[0].finish_reason)


@pytest.mark.parametrize("field", ["max_completion_tokens", "max_tokens"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_token_limit_ends_the_answer_with_length(provider: Provider, field: str, stream: bool) -> None:
    assert await answer(provider, stream, **{field: 2}) == ("answer 0", "length")


async def test_usage_counts_the_tokens_of_a_cut_answer(provider: Provider) -> None:
    completion = await chat(provider, max_completion_tokens=2)

    assert completion.usage is not None
    assert completion.usage.completion_tokens == 2


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_stop_sequence_ends_the_answer_before_it(provider: Provider, stream: bool) -> None:
    assert await answer(provider, stream, stop=[" to", "zzz"]) == ("answer 0", "stop")


async def test_n_answers_n_choices(provider: Provider, fake: FakeAPI) -> None:
    completion = await chat(provider, n=2)

    assert [choice.index for choice in completion.choices] == [0, 1]
    expected = sorted(fake.generate("the sky", j).text for j in range(2))
    assert sorted(str(choice.message.content) for choice in completion.choices) == expected


async def test_tool_call(provider: Provider, case: ProviderCase) -> None:
    if not case.tools:
        pytest.skip(f"{case.type} cannot call tools")
    completion = await chat(provider, tools=[WEATHER])

    [choice] = completion.choices
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls or []
    assert call.type == "function"
    assert call.id
    assert call.function.name == "get_weather"
    assert orjson.loads(call.function.arguments) == tool_arguments("the sky")


async def test_tool_call_streamed(provider: Provider, case: ProviderCase) -> None:
    if not case.tools:
        pytest.skip(f"{case.type} cannot call tools")
    chunks = await chat_stream(provider, tools=[WEATHER], tool_choice="required")

    _, finishes, calls = joined(chunks)
    assert finishes == {0: "tool_calls"}
    [call] = calls[0].values()
    assert call["id"]
    assert call["name"] == "get_weather"
    assert orjson.loads(call["arguments"]) == tool_arguments("the sky")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_tool_result_round_trip(provider: Provider, case: ProviderCase, fake: FakeAPI, stream: bool) -> None:
    if not case.tools:
        pytest.skip(f"{case.type} cannot call tools")
    arguments = orjson.dumps(tool_arguments("the sky")).decode()
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
    messages = [
        *QUESTION,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny and warm"},
    ]
    expected = fake.generate("sunny and warm").text
    if stream:
        texts, finishes, calls = joined(await chat_stream(provider, messages=messages, tools=[WEATHER]))
        assert (texts, finishes, calls) == ({0: expected}, {0: "stop"}, {})
    else:
        completion = await chat(provider, messages=messages, tools=[WEATHER])
        assert completion.choices[0].message.content == expected
        assert completion.choices[0].finish_reason == "stop"


async def test_tools_where_they_cannot_be_called_are_a_400_naming_them(
    provider: Provider, case: ProviderCase, fake: FakeAPI
) -> None:
    if case.tools:
        pytest.skip(f"{case.type} calls tools")
    with pytest.raises(GatewayError) as caught:
        await chat(provider, tools=[WEATHER])
    assert (caught.value.status, caught.value.param) == (400, "tools")


async def test_unsupported_parameter_is_a_400_naming_it(provider: Provider, case: ProviderCase, fake: FakeAPI) -> None:
    if case.chat_unsupported is None:
        pytest.skip(f"{case.type} forwards every chat parameter")
    name, value = case.chat_unsupported

    with pytest.raises(GatewayError) as caught:
        await chat(provider, **{name: value})

    assert (caught.value.status, caught.value.param) == (400, name)
    assert f"'{DEPLOYMENT}'" in caught.value.message
    assert fake.received == []  # refused before any upstream call


@pytest.mark.parametrize(("upstream_status", "status"), [(400, 400), (429, 429), (500, 502)])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_upstream_error_maps_to_its_status(
    provider: Provider, case: ProviderCase, fake: FakeAPI, upstream_status: int, status: int, stream: bool
) -> None:
    needs(case, "http_errors")
    fake.script(Fail(upstream_status, "upstream says no"))

    with pytest.raises(GatewayError) as caught:
        await (chat_stream(provider) if stream else chat(provider))

    assert caught.value.status == status
    assert "upstream says no" in caught.value.message
