"""The conformance suite for the Messages API (`POST /v1/messages`): every deployment type answers
the `anthropic` SDK through the real gateway the same way, plain and streamed (Anthropic's event
order), with max_tokens, stop sequences, tools round trip, usage, upstream errors as the SDK's
exception classes, and count_tokens. Non-Anthropic types are served through the chat translation;
`anthropic` deployments by native pass-through (the upstream's own events, in its own order:
Anthropic sends `ping` after the first block's start, the translation before it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.conformance.cases import ProviderCase
from tests.conformance.conftest import DEPLOYMENT, needs
from tests.conformance.fake_api import Fail, FakeAPI, tool_arguments

QUESTION: Any = [{"role": "user", "content": "the sky"}]
WEATHER: Any = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
}
EVENT_ORDERS = (["message_start", "ping", "content_block_start"], ["message_start", "content_block_start", "ping"])


@pytest.fixture
async def messages(gateway: TestServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=str(gateway.make_url("")), api_key="unused", max_retries=0) as sdk:
        yield sdk


def text_of(message: anthropic.types.Message) -> str:
    return "".join(block.text for block in message.content if block.type == "text")


async def test_plain_message(messages: anthropic.AsyncAnthropic, fake: FakeAPI) -> None:
    message = await messages.messages.create(model=DEPLOYMENT, max_tokens=20, system="be brief", messages=QUESTION)

    expected = fake.generate("the sky")
    assert (message.type, message.role) == ("message", "assistant")
    assert text_of(message) == expected.text
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == len(expected.pieces)
    assert message.usage.input_tokens > 0


async def test_stream_in_anthropics_order_reassembles(
    messages: anthropic.AsyncAnthropic, gateway: TestServer, fake: FakeAPI
) -> None:
    async with messages.messages.stream(model=DEPLOYMENT, max_tokens=20, messages=QUESTION) as stream:
        final = await stream.get_final_message()
    assert text_of(final) == fake.generate("the sky").text
    assert final.stop_reason == "end_turn"

    body = {"model": DEPLOYMENT, "max_tokens": 20, "messages": QUESTION, "stream": True}
    async with ClientSession() as http, http.post(gateway.make_url("/v1/messages"), json=body) as response:
        raw = (await response.read()).decode()
    names = [line[7:] for line in raw.splitlines() if line.startswith("event: ")]
    assert names[:3] in EVENT_ORDERS
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[3:-3]) <= {"content_block_delta"}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_max_tokens_is_max_tokens(messages: anthropic.AsyncAnthropic, stream: bool) -> None:
    message = await _ask(messages, stream, max_tokens=2)
    assert (text_of(message), message.stop_reason) == ("answer 0", "max_tokens")
    assert message.usage.output_tokens == 2


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_stop_sequences_end_the_answer_before_them(messages: anthropic.AsyncAnthropic, stream: bool) -> None:
    message = await _ask(messages, stream, stop_sequences=[" to", "zzz"])
    assert text_of(message) == "answer 0"
    # stop_sequence when the upstream names the stop that matched (vLLM does); else end_turn
    assert message.stop_reason in ("stop_sequence", "end_turn")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_tools_round_trip(
    messages: anthropic.AsyncAnthropic, case: ProviderCase, fake: FakeAPI, stream: bool
) -> None:
    if not case.tools:
        pytest.skip(f"{case.type} cannot call tools")
    called = await _ask(messages, stream, tools=[WEATHER], tool_choice={"type": "any"})
    assert called.stop_reason == "tool_use"
    [call] = [block for block in called.content if block.type == "tool_use"]
    assert call.name == "get_weather"
    assert call.input == tool_arguments("the sky")

    result: Any = {"type": "tool_result", "tool_use_id": call.id, "content": "sunny and warm"}
    history: Any = [*QUESTION, {"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    answered = await _ask(messages, stream, tools=[WEATHER], messages=history)
    assert text_of(answered) == fake.generate("sunny and warm").text
    assert answered.stop_reason == "end_turn"


@pytest.mark.parametrize(
    ("upstream_status", "error"),
    [(400, anthropic.BadRequestError), (429, anthropic.RateLimitError), (500, anthropic.InternalServerError)],
)
async def test_upstream_errors_are_the_sdks_exception_classes(
    messages: anthropic.AsyncAnthropic, case: ProviderCase, fake: FakeAPI, upstream_status: int, error: type
) -> None:
    needs(case, "http_errors")
    fake.script(Fail(upstream_status, "upstream says no"))
    with pytest.raises(anthropic.APIStatusError) as caught:
        await messages.messages.create(model=DEPLOYMENT, max_tokens=20, messages=QUESTION)
    assert isinstance(caught.value, error)
    body: Any = caught.value.body
    assert body["type"] == "error"
    assert "upstream says no" in body["error"]["message"]


async def test_count_tokens(messages: anthropic.AsyncAnthropic, case: ProviderCase, fake: FakeAPI) -> None:
    tools: Any = [WEATHER] if case.tools else []
    counted = await messages.messages.count_tokens(model=DEPLOYMENT, messages=QUESTION, tools=tools)
    assert counted.input_tokens > 0
    if case.type == "anthropic":  # Anthropic's own count: what its answer's usage says
        assert [seen.path for seen in fake.received] == ["/v1/messages/count_tokens"]
    else:
        assert fake.received == []  # counted by the gateway, nothing sent upstream
    if not case.upstream or case.type == "anthropic":  # the local engine counts with its tokenizer
        message = await messages.messages.create(model=DEPLOYMENT, max_tokens=2, messages=QUESTION)
        assert counted.input_tokens == message.usage.input_tokens


async def _ask(sdk: anthropic.AsyncAnthropic, stream: bool, **fields: Any) -> anthropic.types.Message:
    body: Any = {"model": DEPLOYMENT, "max_tokens": 20, "messages": QUESTION, **fields}
    if not stream:
        message: anthropic.types.Message = await sdk.messages.create(**body)
        return message
    async with sdk.messages.stream(**body) as streamed:
        return await streamed.get_final_message()
