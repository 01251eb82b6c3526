"""`POST /v1/responses` with `stream: true`: the chat stream as the Responses API's semantic events,
with the real `openai` SDK (`responses.stream`, `stream=True`) against the mock and a loopback chat
upstream; a failure mid-stream is an `error` event; and, property-based, any chat stream translated
to events reassembles (through the events themselves and through the gateway's own chat assembly)
to the response the plain translation gives."""

from __future__ import annotations

import copy
from typing import Any

import openai
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.api.responses.bridge import Bridge
from gateway.api.responses.events import EventTranslator
from gateway.http.responses import validate_responses
from policies.cache.chat_stream import ChatAssembler
from tests.conftest import GatewayFactory, deployment
from tests.gateway.responses.test_responses_api import WEATHER, sdk
from tests.support.fake_upstream import FakeUpstream, chat_chunk, chat_stream

Json = dict[str, Any]


def reassembled(events: list[Json]) -> Json:
    """The response the events spell, built from the events alone (as a client would)."""
    numbers = [event["sequence_number"] for event in events]
    assert numbers == list(range(len(events)))
    assert [event["type"] for event in events[:2]] == ["response.created", "response.in_progress"]
    output: dict[int, Json] = {}
    texts: dict[int, str] = {}
    arguments: dict[int, str] = {}
    for event in events[2:-1]:
        kind, index = event["type"], int(event.get("output_index", -1))
        if kind == "response.output_item.added":
            assert index not in output
            output[index] = copy.deepcopy(event["item"])
        elif kind in ("response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta"):
            texts[index] = texts.get(index, "") + event["delta"]
        elif kind == "response.output_text.done":
            assert event["text"] == texts.get(index, "")
        elif kind == "response.function_call_arguments.delta":
            arguments[index] = arguments.get(index, "") + event["delta"]
        elif kind == "response.function_call_arguments.done":
            assert event["arguments"] == arguments.get(index, "")
        elif kind == "response.output_item.done":
            assert event["item"]["id"] == output[index]["id"]
            output[index] = event["item"]
    final = events[-1]
    assert final["type"] in ("response.completed", "response.incomplete")
    assert [output[index] for index in sorted(output)] == final["response"]["output"]
    response: Json = final["response"]
    return response


def without_ids(response: Json) -> Json:
    found = copy.deepcopy(response)
    found.pop("completed_at", None)
    for item in found["output"]:
        item.pop("id", None)
    return found


_words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=6)


@st.composite
def chat_streams(draw: st.DrawFn) -> tuple[list[Json], str]:
    deltas: list[Json] = [{"role": "assistant", "content": ""}]
    kind = draw(st.sampled_from(["content", "refusal"]))
    deltas += [{kind: piece} for piece in draw(st.lists(_words, max_size=5))]
    for position in range(draw(st.integers(0, 3))):
        opening = {
            "index": position,
            "id": f"call_{position}",
            "type": "function",
            "function": {"name": draw(st.sampled_from(["get_weather", "ns__lookup"])), "arguments": ""},
        }
        deltas.append({"tool_calls": [opening]})
        for piece in draw(st.lists(_words, max_size=3)):
            deltas.append({"tool_calls": [{"index": position, "function": {"arguments": piece}}]})
    finish = draw(st.sampled_from(["stop", "length", "tool_calls", "content_filter"]))
    return deltas, finish


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(chat_streams(), st.booleans())
def test_any_chat_stream_reassembles_to_the_plain_translation(stream: tuple[list[Json], str], usage: bool) -> None:
    deltas, finish = stream
    tools = [
        WEATHER,
        {"type": "namespace", "name": "ns", "description": "d", "tools": [{"type": "function", "name": "lookup"}]},
    ]
    bridge = Bridge.of(validate_responses({"model": "m", "input": "hi", "tools": tools, "stream": True}))
    body = {"model": "m"}
    chunks = [orjson.loads(chat_chunk(body, delta)) for delta in deltas]
    chunks.append(orjson.loads(chat_chunk(body, {}, finish)))
    if usage:
        chunks.append(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "m",
                "choices": [],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
            }
        )
    translator = EventTranslator(bridge)
    encoded = translator.start()
    for chunk in chunks:
        encoded += translator.feed(chunk)
    encoded += translator.finish()

    streamed = reassembled([orjson.loads(event) for event in encoded])
    assembler = ChatAssembler()
    assembler.feed(orjson.dumps(chunk) for chunk in chunks)
    plain = bridge.response(assembler.finish() or {})
    assert without_ids(streamed) == without_ids(plain)


def test_reasoning_deltas_become_a_reasoning_item_before_the_message() -> None:
    bridge = Bridge.of(validate_responses({"model": "m", "input": "hi", "stream": True}))
    events = translated(bridge, [{"reasoning_content": "think "}, {"reasoning_content": "more"}, {"content": "answer"}])
    response = reassembled(events)
    assert [item["type"] for item in response["output"]] == ["reasoning", "message"]
    assert response["output"][0]["content"] == [{"type": "reasoning_text", "text": "think more"}]
    plain = bridge.response(
        {"choices": [{"message": {"content": "answer", "reasoning_content": "think more"}, "finish_reason": "stop"}]}
    )
    assert without_ids(response) == without_ids(plain)


def test_a_reasoning_delta_after_text_closes_the_message_first() -> None:
    bridge = Bridge.of(validate_responses({"model": "m", "input": "hi", "stream": True}))
    events = translated(bridge, [{"content": "first"}, {"reasoning": "then a thought"}, {"content": "second"}])
    kinds = [(event["type"], event.get("output_index")) for event in events]
    assert kinds.index(("response.output_item.done", 0)) < kinds.index(("response.output_item.added", 1))
    response = reassembled(events)
    assert [item["type"] for item in response["output"]] == ["message", "reasoning", "message"]
    assert response["output"][0]["content"][0]["text"] == "first"


def translated(bridge: Bridge, deltas: list[Json]) -> list[Json]:
    """The events (decoded) of a chat stream of `deltas` that stops."""
    translator = EventTranslator(bridge)
    encoded = translator.start()
    for delta in deltas:
        encoded += translator.feed(orjson.loads(chat_chunk({"model": "m"}, delta)))
    encoded += translator.feed(orjson.loads(chat_chunk({"model": "m"}, {}, "stop")))
    encoded += translator.finish()
    return [orjson.loads(event) for event in encoded]


def _chunk(content: str, tail: bytes) -> bytes:
    return chat_chunk({"model": "m"}, {"content": content})[:-1] + tail + b"}"


def test_a_text_chunk_that_carries_the_usage_or_a_second_choices_is_read_as_the_parser_reads_it() -> None:
    bridge = Bridge.of(validate_responses({"model": "m", "input": "hi", "stream": True}))
    translator = EventTranslator(bridge)
    usage = b',"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}'
    twice = b',"choices":[{"index":0,"delta":{"content":" the last"},"logprobs":null,"finish_reason":null}]'
    payloads = [
        chat_chunk({"model": "m"}, {"content": "first"}),
        _chunk(" counted", usage),
        _chunk(" shadowed", twice),  # a duplicate key: the last one is the chunk's, as the parser reads it
        chat_chunk({"model": "m"}, {}, "stop"),
    ]
    events = [orjson.loads(event) for event in translator.start() + translator.feed_payloads(payloads)]
    events += [orjson.loads(event) for event in translator.finish()]
    response = reassembled(events)
    assert response["output"][0]["content"][0]["text"] == "first counted the last"
    assert response["usage"]["total_tokens"] == 5


# --- the SDK, end to end -----------------------------------------------------------------------------------------


async def test_the_sdk_streams_text_events_in_order_on_the_mock(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway({"deployments": [{"name": "m", "provider": {"type": "mock"}}]})
    async with sdk(gateway) as client, client.responses.stream(model="m", input="Tell me") as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert "response.output_text.delta" in kinds
    assert final.status == "completed"
    assert final.output_text
    assert final.usage is not None
    assert final.usage.output_tokens > 0
    async with sdk(gateway) as client:
        stored = await client.responses.retrieve(final.id)
    assert stored.output_text == final.output_text


async def test_a_streamed_function_call_has_its_argument_events(gateway: TestServer, upstream: FakeUpstream) -> None:
    async with sdk(gateway) as client:
        events = [
            event
            async for event in await client.responses.create(
                model="fake", input="Weather?", tools=[WEATHER], stream=True
            )
        ]
    kinds = [event.type for event in events]
    assert kinds.count("response.function_call_arguments.delta") == 2
    done = next(event for event in events if event.type == "response.function_call_arguments.done")
    assert done.arguments == '{"city": "Paris"}'
    final = events[-1]
    assert final.type == "response.completed"
    [call] = final.response.output
    assert call.type == "function_call"
    assert (call.call_id, call.name) == ("call_fake1", "get_weather")
    assert upstream.received[0].body["stream_options"] == {"include_usage": True}
    assert final.response.usage is not None
    assert final.response.usage.input_tokens == 7


def _cut_after_words() -> Any:
    async def behaviour(request: web.Request, body: Json) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for delta in ({"role": "assistant", "content": ""}, {"content": "partial "}):
            await response.write(b"data: " + chat_chunk(body, delta) + b"\n\n")
        assert request.transport is not None
        request.transport.abort()
        return response

    return behaviour


async def test_a_failure_mid_stream_is_an_error_event(gateway: TestServer, upstream: FakeUpstream) -> None:
    upstream.script(_cut_after_words())
    seen: list[Any] = []

    async def read_all(client: openai.AsyncOpenAI) -> None:
        async for event in await client.responses.create(model="fake", input="hi", stream=True):
            seen.append(event)

    async with sdk(gateway) as client:
        with pytest.raises(openai.APIError):
            await read_all(client)
    kinds = [event.type for event in seen]
    assert "response.output_text.delta" in kinds
    assert kinds[-2:] == ["error", "response.failed"]
    assert seen[-1].response.status == "failed"


async def test_a_cached_stream_replays_as_events(make_gateway: GatewayFactory, upstream: FakeUpstream) -> None:
    fake = deployment("fake", upstream.base_url, retries=0, policies=["cached"])
    gateway = await make_gateway({"deployments": [fake], "policies": {"cached": {"cache": {"ttl_s": 60}}}})
    async with sdk(gateway) as client:
        finals = []
        for _ in range(2):
            async with client.responses.stream(model="fake", input="same words") as stream:
                _ = [event async for event in stream]
                finals.append(await stream.get_final_response())
    assert len(upstream.received) == 1
    assert finals[0].output_text == finals[1].output_text == "echo: same words "  # the fake streams word + " "
    assert finals[0].id != finals[1].id  # each answer is a response of its own


async def test_a_bridged_stream_reads_the_chunks_its_relay_parsed(
    gateway: TestServer, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    def parsed_again(translator: EventTranslator, payloads: list[bytes]) -> list[bytes]:
        raise AssertionError("the relay's parse was not handed along")

    monkeypatch.setattr(EventTranslator, "feed_payloads", parsed_again)
    prompt_filter = orjson.dumps(  # Azure's first frame: dropped by the relay, with its parse
        {"choices": [], "created": 0, "id": "", "model": "", "object": "", "prompt_filter_results": []}
    )
    upstream.script(chat_stream(prelude=(prompt_filter,)))
    async with sdk(gateway) as client, client.responses.stream(model="fake", input="two words") as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert kinds.count("response.output_text.delta") == 3  # "echo: ", "two ", "words "
    assert final.output_text == "echo: two words "
