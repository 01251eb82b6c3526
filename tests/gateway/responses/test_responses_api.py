"""`POST /v1/responses` bridged onto the chat pipeline, with the real `openai` SDK
(`client.responses.create`, `.stream`, `.retrieve`, `.delete`, `.input_items.list`) against the mock
and a loopback OpenAI-compatible chat upstream: validation 400s naming the field, items ↔ messages,
tools (function, namespaces flattened, built-ins left out and named), text.format, max output
tokens → incomplete, the stream's semantic events (property: they reassemble to the plain
translation), stored responses (memory and a real Redis shared by two apps, another key → 404,
store: false, delete), previous_response_id rebuilding the conversation, cache, guardrails
(what is stored stays redacted), the `responses` api label."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.api.errors import GatewayError
from gateway.api.parsing import validate_chat
from gateway.api.responses.bridge import Bridge
from gateway.http.responses import validate_responses
from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream
from tests.support.observability_helpers import log_lines

Json = dict[str, Any]
WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
KEY_A, KEY_B = "sk-team-a-0123456789abcdef", "sk-team-b-0123456789abcdef"


def bridge_body(body: Json) -> Json:
    """What the gateway sends upstream for `body` (or the 400 it raises)."""
    return Bridge.of(validate_responses(body)).chat_payload([])


def sdk(gateway: TestServer, key: str = "unused") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key=key, max_retries=0)


async def post(http: ClientSession, gateway: TestServer, body: Json, **headers: str) -> tuple[int, Any, Any]:
    async with http.post(gateway.make_url("/v1/responses"), json=body, headers=headers) as response:
        return response.status, orjson.loads(await response.read()), response.headers


# --- validation --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x"}, "model"),
        ({"model": "m"}, "input"),
        ({"model": "m", "input": []}, "input"),
        ({"model": "m", "input": 3}, "input"),
        ({"model": "m", "input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        ({"model": "m", "input": [{"role": "user", "content": 5}]}, "input[0].content"),
        (
            {"model": "m", "input": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]},
            "input[0].content[0].type",
        ),
        (
            {"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
            "input[0].content[0].image_url",
        ),
        ({"model": "m", "input": [{"role": "user", "content": "x"}, "x"]}, "input[1]"),
        ({"model": "m", "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0].call_id"),
        ({"model": "m", "input": [{"type": "function_call_output", "call_id": "c", "output": 3}]}, "input[0].output"),
        ({"model": "m", "input": [{"type": "web_search_call", "id": "w"}]}, "input[0].type"),
        ({"model": "m", "input": "x", "temperature": 3}, "temperature"),
        ({"model": "m", "input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"model": "m", "input": "x", "max_output_tokens": "16"}, "max_output_tokens"),
        ({"model": "m", "input": "x", "text": {"format": {"type": "xml"}}}, "text.format"),
        ({"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}}, "text.format.name"),
        ({"model": "m", "input": "x", "tools": [{"type": "function", "name": "bad name"}]}, "tools[0].name"),
        (
            {"model": "m", "input": "x", "tools": [{"type": "namespace", "name": "ns", "tools": [{"type": "web"}]}]},
            "tools[0].tools[0].type",
        ),
        ({"model": "m", "input": "x", "tool_choice": "sometimes"}, "tool_choice"),
        (
            {"model": "m", "input": "x", "tools": [{"type": "web_search"}], "tool_choice": {"type": "web_search"}},
            "tool_choice",
        ),
        ({"model": "m", "input": "x", "tools": [{"type": "file_search"}], "tool_choice": "required"}, "tool_choice"),
        ({"model": "m", "input": "x", "background": True}, "background"),
        ({"model": "m", "input": "x", "stream_options": {}}, "stream_options"),
        ({"model": "m", "input": "x", "reasoning": {"effort": "huge"}}, "reasoning.effort"),
        ({"model": "m", "input": "x", "store": "no"}, "store"),
        ({"model": "m", "input": "x", "metadata": {"k": 1}}, "metadata.k"),
        ({"model": "m", "input": "x", "truncation": "sometimes"}, "truncation"),
        ({"model": "m", "input": "x", "conversation": "conv_1"}, "conversation"),
    ],
)
def test_bad_bodies_are_400s_naming_the_field(body: Json, param: str) -> None:
    with pytest.raises(GatewayError) as refused:
        bridge_body(body)
    assert refused.value.status == 400
    assert refused.value.param == param, refused.value.message
    assert param.split(".")[0].split("[")[0] in refused.value.message


def test_items_become_chat_messages_and_options_chat_fields() -> None:
    body = {
        "model": "m",
        "instructions": "Be brief.",
        "input": [
            {"role": "developer", "content": "Use metric units."},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Weather here?"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AA==", "detail": "low"},
                    {"type": "input_file", "file_data": "data:application/pdf;base64,AA==", "filename": "a.pdf"},
                ],
            },
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
            {"type": "function_call", "call_id": "c2", "name": "ns__lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "ok"}]},
        ],
        "tools": [
            WEATHER,
            {"type": "web_search"},
            {"type": "namespace", "name": "ns", "description": "d", "tools": [{"type": "function", "name": "lookup"}]},
        ],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "parallel_tool_calls": False,
        "max_output_tokens": 50,
        "temperature": 0.5,
        "top_p": 0.9,
        "reasoning": {"effort": "low"},
        "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}, "strict": True}},
        "user": "u1",
        "store": False,
        "metadata": {"team": "a"},
        "include": ["reasoning.encrypted_content"],
        "truncation": "auto",
    }
    chat = bridge_body(body)
    assert chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Use metric units."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather here?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA==", "detail": "low"}},
                {"type": "file", "file": {"file_data": "data:application/pdf;base64,AA==", "filename": "a.pdf"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
                {"id": "c2", "type": "function", "function": {"name": "ns__lookup", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "ok"},
    ]
    assert [tool["function"]["name"] for tool in chat["tools"]] == ["get_weather", "ns__lookup"]  # no web_search
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert chat["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "w", "schema": {"type": "object"}, "strict": True},
    }
    assert (chat["max_completion_tokens"], chat["temperature"], chat["top_p"]) == (50, 0.5, 0.9)
    assert (chat["reasoning_effort"], chat["user"], chat["parallel_tool_calls"]) == ("low", "u1", False)
    for kept_here in ("store", "metadata", "include", "truncation", "instructions", "input"):
        assert kept_here not in chat


# --- the SDK against the mock and a chat upstream ----------------------------------------------------------------


async def test_create_on_the_mock_is_a_completed_response_the_sdk_parses(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway({"deployments": [{"name": "m", "provider": {"type": "mock"}}]})
    async with sdk(gateway) as client:
        response = await client.responses.create(model="m", input="Say hi", instructions="Be brief.")
        assert (response.object, response.status, response.model) == ("response", "completed", "m")
        assert response.id.startswith("resp_")
        [message] = response.output
        assert message.type == "message"
        assert response.output_text
        part = message.content[0]
        assert part.type == "output_text"
        assert response.output_text == part.text
        assert response.usage is not None
        assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens > 0
        assert response.usage.input_tokens_details.cached_tokens == 0
        assert response.usage.output_tokens_details.reasoning_tokens == 0
        assert response.instructions == "Be brief."

        cut = await client.responses.create(model="m", input="Say a lot", max_output_tokens=1)
        assert cut.status == "incomplete"
        assert cut.incomplete_details is not None
        assert cut.incomplete_details.reason == "max_output_tokens"


async def test_a_function_tool_round_trip_through_previous_response_id_and_through_full_input(
    gateway: TestServer, upstream: FakeUpstream
) -> None:
    async with sdk(gateway) as client:
        first = await client.responses.create(model="fake", input="Weather in Paris?", tools=[WEATHER])
        [call] = first.output
        assert call.type == "function_call"
        assert (call.name, call.call_id, call.arguments) == ("get_weather", "call_fake1", '{"city": "Paris"}')
        assert upstream.received[0].body["tools"][0]["function"]["name"] == "get_weather"

        result: Any = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
        chained = await client.responses.create(
            model="fake", previous_response_id=first.id, input=[result], tools=[WEATHER]
        )
        assert chained.output_text == "echo: sunny"
        assert chained.previous_response_id == first.id
        sent = upstream.received[1].body["messages"]
        assert sent == [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_fake1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_fake1", "content": "sunny"},
        ]

        question = {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]}
        full: Any = [question, call.model_dump(exclude_none=True), result]
        again = await client.responses.create(model="fake", input=full, tools=[WEATHER], store=False)
        assert again.output_text == "echo: sunny"
        assert upstream.received[2].body["messages"] == sent


async def test_namespaced_tools_are_flattened_and_named_back(gateway: TestServer, upstream: FakeUpstream) -> None:
    namespace: Any = {
        "type": "namespace",
        "name": "mcp",
        "description": "d",
        "tools": [{"type": "function", "name": "get_weather"}],
    }
    async with sdk(gateway) as client:
        response = await client.responses.create(model="fake", input="Weather?", tools=[namespace])
    assert upstream.received[0].body["tools"][0]["function"]["name"] == "mcp__get_weather"
    [call] = response.output
    assert (call.type, call.name, call.namespace) == ("function_call", "get_weather", "mcp")  # type: ignore[union-attr]


async def test_built_in_tools_are_left_out_and_named_in_a_header_and_the_access_log(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path
) -> None:
    path = tmp_path / "access.log"
    fake = deployment("fake", upstream.base_url, retries=0)
    gateway = await make_gateway({"deployments": [fake], "observability": {"access_log": {"path": str(path)}}})
    body = {"model": "fake", "input": "hi", "tools": [{"type": "web_search"}, WEATHER, {"type": "file_search"}]}
    status, answer, headers = await post(http, gateway, body)
    assert status == 200
    assert headers["x-gateway-dropped-tools"] == "web_search,file_search"
    assert [tool["function"]["name"] for tool in upstream.received[0].body["tools"]] == ["get_weather"]
    assert answer["tools"] == body["tools"]  # the response echoes what the client sent
    [line] = await log_lines(path, 1)
    assert (line["api"], line["dropped_tools"]) == ("responses", "web_search,file_search")

    status, error, _ = await post(http, gateway, {**body, "tool_choice": {"type": "web_search"}})
    assert (status, error["error"]["param"]) == (400, "tool_choice")
    assert "web_search" in error["error"]["message"]
    assert len(upstream.received) == 1


async def test_background_is_a_clear_400_and_so_is_cancel(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await client.responses.create(model="fake", input="x", background=True)
    assert refused.value.param == "background"
    with pytest.raises(openai.BadRequestError) as cancelled:
        await client.responses.cancel("resp_123")
    assert cancelled.value.code == "unsupported_background"


async def test_a_deployment_narrowed_away_from_chat_cannot_serve_it(
    make_gateway: GatewayFactory, http: ClientSession
) -> None:
    gateway = await make_gateway(
        {"deployments": [{"name": "m", "provider": {"type": "mock"}, "apis": ["completions"]}]}
    )
    status, error, _ = await post(http, gateway, {"model": "m", "input": "x"})
    assert status == 400
    assert "'m'" in error["error"]["message"]
    assert error["error"]["code"] == "unsupported_api"


# --- fuzzing: any body is a 400 naming a field, or a chat body the chat validator accepts ----------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-1, 3), st.text(max_size=5))
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_text = st.text(max_size=8)
_part = st.one_of(
    st.builds(lambda t: {"type": "input_text", "text": t}, _text),
    st.builds(
        lambda u, d: {"type": "input_image", "image_url": u, "detail": d},
        st.sampled_from(["https://x/y.png", "data:image/png;base64,AA=="]),
        st.sampled_from(["low", "auto"]),
    ),
    st.builds(lambda d: {"type": "input_file", "file_data": d, "filename": "a.pdf"}, _text),
)
_call = st.builds(
    lambda c, n, a, ns: {"type": "function_call", "call_id": c, "name": n, "arguments": a, **ns},
    st.sampled_from(["c1", "c2"]),
    st.sampled_from(["get_weather", "lookup"]),
    _text,
    st.sampled_from([{}, {"namespace": "ns"}]),
)
_item = st.one_of(
    st.builds(
        lambda r, c: {"role": r, "content": c},
        st.sampled_from(["user", "system", "developer"]),
        st.one_of(_text, st.lists(_part, min_size=1, max_size=3)),
    ),
    st.builds(
        lambda c: {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": c}]}, _text
    ),
    _call,
    st.builds(
        lambda c, o: {"type": "function_call_output", "call_id": c, "output": o},
        st.sampled_from(["c1", "c2"]),
        st.one_of(_text, st.lists(_part, max_size=2)),
    ),
    st.builds(lambda t: {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": t}]}, _text),
)
_tool = st.one_of(
    st.just(WEATHER),
    st.just({"type": "web_search"}),
    st.just({"type": "custom", "name": "apply_patch", "description": "d"}),
    st.just({"type": "namespace", "name": "ns", "description": "d", "tools": [{"type": "function", "name": "lookup"}]}),
)
_valid = st.fixed_dictionaries(
    {"model": st.just("m"), "input": st.one_of(_text, st.lists(_item, min_size=1, max_size=5))},
    optional={
        "instructions": _text,
        "tools": st.lists(_tool, max_size=4, unique_by=lambda tool: str(tool)),
        "tool_choice": st.sampled_from(
            [
                "auto",
                "none",
                "required",
                {"type": "function", "name": "get_weather"},
                {"type": "function", "name": "lookup", "namespace": "ns"},
                {"type": "web_search"},
                {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "get_weather"}]},
            ]
        ),
        "max_output_tokens": st.integers(1, 100),
        "temperature": st.floats(0, 2),
        "top_p": st.floats(0, 1),
        "parallel_tool_calls": st.booleans(),
        "stream": st.booleans(),
        "store": st.booleans(),
        "text": st.sampled_from(
            [
                {"format": {"type": "text"}},
                {"format": {"type": "json_object"}},
                {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}}},
            ]
        ),
        "reasoning": st.sampled_from([{"effort": "low"}, {"effort": "high", "summary": "auto"}]),
        "metadata": st.dictionaries(st.text(min_size=1, max_size=5), _text, max_size=3),
        "user": _text,
        "top_logprobs": st.integers(0, 20),
        "include": st.just(["reasoning.encrypted_content"]),
    },
)


@st.composite
def _bodies(draw: st.DrawFn) -> Json:
    """A valid body, or one with a field (or an item's field) replaced by any JSON value."""
    body = draw(_valid)
    if draw(st.booleans()):
        field = draw(st.sampled_from([*sorted(body), "tools", "tool_choice", "text"]))
        body[field] = draw(_json)
    elif isinstance(body["input"], list) and draw(st.booleans()):
        item = draw(st.sampled_from(body["input"]))
        item[draw(st.sampled_from(sorted(item)))] = draw(_json)
    return body


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(_bodies())
def test_any_body_is_a_400_naming_a_field_or_a_valid_chat_body(body: Json) -> None:
    refused: GatewayError | None = None
    try:
        chat = bridge_body(body)
    except GatewayError as error:
        refused = error
    if refused is not None:
        assert refused.status == 400
        assert refused.param
    else:
        validate_chat(chat)  # what the bridge sends is a chat body the chat API accepts
