"""Chat requests and answers translated to and from Anthropic's Messages API and Gemini's
generateContent, checked against the shapes their references document (request bodies, answers,
stream events), without HTTP: the adapters alone."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.api.errors import InvalidRequest
from providers.anthropic import AnthropicAdapter, AnthropicOptions
from providers.chat.shape import chat_body
from providers.gemini import GeminiAdapter, GeminiOptions
from providers.translated.adapter import UpstreamCall

PNG = "data:image/png;base64,iVBORw0KGgo="
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather by city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
ROME = {"city": "Rome"}
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "developer", "content": [{"type": "text", "text": "Use metric units."}]},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Weather here?"},
            {"type": "image_url", "image_url": {"url": PNG}},
        ],
    },
    {"role": "assistant", "content": "Checking.", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
    {"role": "user", "content": "Thanks. And tomorrow?"},
]


def anthropic() -> AnthropicAdapter:
    return AnthropicAdapter("conf", AnthropicOptions(model="claude-x"), "key")


def gemini() -> GeminiAdapter:
    return GeminiAdapter("conf", GeminiOptions(model="gemini-x"), "key")


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": CONVERSATION, **fields}


def test_anthropic_request_carries_system_messages_tools_and_results() -> None:
    plan = anthropic().plan(body(tools=[TOOL], tool_choice="required", max_tokens=50, stop="END"), False, "chat")

    [call] = plan.calls
    assert call.api == "chat"
    assert call.body == {
        "model": "claude-x",
        "max_tokens": 50,
        "stop_sequences": ["END"],
        "system": "Be brief.\n\nUse metric units.",
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather by city",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            }
        ],
        "tool_choice": {"type": "any"},
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather here?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
                ],
            },
            {  # the tool result and the next user message: one user turn
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": '{"temp": 21}'},
                    {"type": "text", "text": "Thanks. And tomorrow?"},
                ],
            },
        ],
    }


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        ("auto", None, {"type": "auto"}),
        ("none", None, {"type": "none"}),
        ({"type": "function", "function": {"name": "get_weather"}}, None, {"type": "tool", "name": "get_weather"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
    ],
)
def test_anthropic_tool_choice(choice: Any, parallel: bool | None, expected: dict[str, Any]) -> None:
    fields = {"tool_choice": choice, "parallel_tool_calls": parallel}
    plan = anthropic().plan(body(tools=[TOOL], **{k: v for k, v in fields.items() if v is not None}), False, "chat")

    assert plan.calls[0].body["tool_choice"] == expected


def test_anthropic_image_url_is_a_url_source_and_n_is_n_calls() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    messages = [{"role": "user", "content": [image]}]
    plan = anthropic().plan({"model": "m", "messages": messages, "n": 3}, True, "chat")

    assert len(plan.calls) == 3
    assert plan.calls[0].body["stream"] is True
    source = plan.calls[0].body["messages"][0]["content"][0]["source"]
    assert source == {"type": "url", "url": "https://example.com/cat.png"}
    assert plan.calls[0].body["max_tokens"] == 4096  # chat_max_tokens: no small default for chat


def test_anthropic_answer_with_tool_use_is_a_tool_call() -> None:
    """The Messages API's documented answer to a tool-use request."""
    answer = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [
            {"type": "text", "text": "I'll check."},
            {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 10, "cache_read_input_tokens": 5},
    }
    adapter = anthropic()
    call = adapter.plan(body(tools=[TOOL]), False, "chat").calls[0]
    result = chat_body([adapter.reply(call, answer)], [0], "claude-x")

    message = result["choices"][0]["message"]
    assert result["object"] == "chat.completion"
    assert result["choices"][0]["finish_reason"] == "tool_calls"
    assert message["content"] == "I'll check."
    assert message["tool_calls"] == [
        {"id": "toolu_01", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    ]
    assert result["usage"] == {
        "prompt_tokens": 25,
        "completion_tokens": 10,
        "total_tokens": 35,
        "prompt_tokens_details": {"cached_tokens": 5},
    }


@pytest.mark.parametrize(
    ("reason", "finish"), [("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length")]
)
def test_anthropic_stop_reasons(reason: str, finish: str) -> None:
    adapter = anthropic()
    call = adapter.plan(body(), False, "chat").calls[0]
    answer = {"content": [{"type": "text", "text": "hi"}], "stop_reason": reason, "usage": {}}
    assert adapter.reply(call, answer).choices[0].finish_reason == finish


def test_anthropic_stream_events_become_text_and_tool_call_deltas() -> None:
    """The event sequence of Anthropic's streaming reference for a tool_use answer."""
    adapter = anthropic()
    translator = adapter.translator(adapter.plan(body(tools=[TOOL]), True, "chat").calls[0])
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 30, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Okay"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {}},
        },
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"city":'}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '"Oslo"}'}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 12}},
        {"type": "message_stop"},
    ]
    deltas = [delta for event in events for delta in translator.feed(event)]

    assert "".join(delta.text for delta in deltas) == "Okay"
    calls = [call for delta in deltas for call in delta.tool_calls]
    assert (calls[0].id, calls[0].name, calls[0].index) == ("toolu_9", "get_weather", 0)
    assert orjson.loads("".join(call.arguments for call in calls)) == {"city": "Oslo"}
    assert deltas[-1].finish_reason == "tool_calls"
    assert translator.ended
    assert translator.usage is not None
    assert (translator.usage.prompt_tokens, translator.usage.completion_tokens) == (30, 12)


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"logprobs": True}, "logprobs"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"temperature": 1.5}, "temperature"),
        ({"tools": [{"type": "custom", "custom": {"name": "x"}}]}, "tools[0].type"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}
                ]
            },
            "messages[0].content[0]",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{**CALL, "function": {"name": "f", "arguments": "not json"}}],
                    }
                ]
            },
            "messages[0].tool_calls[0].function.arguments",
        ),
    ],
)
def test_anthropic_refuses_what_it_cannot_honour_naming_the_field(fields: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        anthropic().plan(body(**fields), False, "chat")
    assert caught.value.param == param
    assert "'conf'" in caught.value.message


def test_gemini_request_carries_system_roles_functions_and_config() -> None:
    fields = {
        "tools": [TOOL],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "n": 2,
        "max_completion_tokens": 64,
        "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}},
        "logprobs": True,
        "top_logprobs": 3,
    }
    plan = gemini().plan(body(**fields), False, "chat")

    [call] = plan.calls
    assert call.url.endswith("/v1beta/models/gemini-x:generateContent")
    assert call.choices == 2
    assert call.body == {
        "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Use metric units."}]},
        "contents": [
            {
                "role": "user",
                "parts": [{"text": "Weather here?"}, {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}],
            },
            {
                "role": "model",
                "parts": [{"text": "Checking."}, {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "get_weather", "response": {"temp": 21}}},
                    {"text": "Thanks. And tomorrow?"},
                ],
            },
        ],
        "generationConfig": {
            "maxOutputTokens": 64,
            "candidateCount": 2,
            "responseLogprobs": True,
            "logprobs": 3,
            "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "object"},
        },
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "description": "Weather by city",
                        "parametersJsonSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
                    }
                ]
            }
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}},
    }


def test_gemini_answer_with_function_call_and_safety_stop() -> None:
    """A documented GenerateContentResponse: a function call, and a candidate stopped for SAFETY."""
    answer = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}}],
                },
                "finishReason": "STOP",
                "index": 0,
            },
            {"content": {"role": "model", "parts": [{"text": "I can"}]}, "finishReason": "SAFETY", "index": 1},
        ],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4, "thoughtsTokenCount": 2},
        "modelVersion": "gemini-x",
    }
    adapter = gemini()
    call = UpstreamCall("u", {"generationConfig": {}}, 2, "chat")
    result = chat_body([adapter.reply(call, answer)], [0], "gemini-x")

    first, second = result["choices"]
    assert first["finish_reason"] == "tool_calls"
    [tool_call] = first["message"]["tool_calls"]
    assert tool_call["function"] == {"name": "get_weather", "arguments": '{"city":"Rome"}'}
    assert tool_call["id"].startswith("call_")
    assert first["message"]["content"] is None
    assert (second["message"]["content"], second["finish_reason"]) == ("I can", "content_filter")
    assert result["usage"]["completion_tokens_details"] == {"reasoning_tokens": 2}
    assert result["usage"]["completion_tokens"] == 6


def test_gemini_stream_function_call_and_max_tokens() -> None:
    adapter = gemini()
    call = UpstreamCall("u", {"generationConfig": {}}, 1, "chat")
    translator = adapter.translator(call)
    events: list[dict[str, Any]] = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}, "index": 0}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "lo"}]}, "finishReason": "MAX_TOKENS"}]},
    ]
    deltas = [delta for event in events for delta in translator.feed(event)]

    assert "".join(delta.text for delta in deltas) == "Hello"
    assert deltas[-1].finish_reason == "length"
    assert translator.complete_at_eof


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"logit_bias": {"1": 2}}, "logit_bias"),
        ({"tools": [TOOL], "parallel_tool_calls": False}, "parallel_tool_calls"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]},
         "messages[0].content[0]"),
        ({"messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]}, "messages[0].tool_call_id"),
    ],
)  # fmt: skip
def test_gemini_refuses_what_it_cannot_honour_naming_the_field(fields: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        gemini().plan(body(**fields), False, "chat")
    assert caught.value.param == param
