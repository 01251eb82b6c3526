"""The Messages translation's own promises, fuzzed.

- Any chat stream (reasoning, then text, then tool calls with their arguments cut anywhere; any
  finish and usage; the chunks delivered in any batches) translated to Anthropic's events is in
  Anthropic's order and reassembles to exactly the message the plain translation makes of the same
  answer sent whole.
- Any JSON body is either translated or refused with a `FieldError` naming a field: never another
  exception (which would be a 500).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.api.errors import GatewayError
from gateway.api.messages.answer import from_chat
from gateway.api.messages.errors import AnthropicError
from gateway.api.messages.events import MessageEvents
from gateway.api.messages.request import to_chat
from gateway.api.schemas import FieldError

TEXT = st.text(min_size=1, max_size=8)
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def chat_answers(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[str]]:
    """(the deltas of one streamed choice, the stop sequences asked)."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}] if draw(st.booleans()) else []
    deltas += [{"reasoning_content": piece} for piece in draw(st.lists(TEXT, max_size=3))]
    deltas += [{"content": piece} for piece in draw(st.lists(TEXT, max_size=4))]
    for index in range(draw(st.integers(0, 3))):
        arguments = orjson.dumps(draw(st.dictionaries(st.text(max_size=4), JSON_VALUE, max_size=3))).decode()
        cuts = sorted(draw(st.lists(st.integers(0, len(arguments)), max_size=3)))
        pieces = [arguments[a:b] for a, b in zip([0, *cuts], [*cuts, len(arguments)], strict=True)]
        opening: dict[str, Any] = {
            "index": index,
            "id": f"call_{index}",
            "type": "function",
            "function": {"name": f"f{index}"},
        }
        opening["function"]["arguments"] = pieces[0]
        deltas.append({"tool_calls": [opening]})
        deltas += [{"tool_calls": [{"index": index, "function": {"arguments": piece}}]} for piece in pieces[1:]]
    stops = draw(st.lists(TEXT, max_size=2))
    return deltas, stops


def chunk(delta: dict[str, Any], finish: Any = None, **extra: Any) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish, **extra}
    return orjson.dumps({"id": "chatcmpl-x", "model": "m", "object": "chat.completion.chunk", "choices": [choice]})


def whole(deltas: list[dict[str, Any]], finish: str, matched: Any, usage: Any) -> dict[str, Any]:
    """The same answer sent whole: what a chat upstream's plain answer holds."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    calls: dict[int, dict[str, Any]] = {}
    for delta in deltas:
        for name in ("reasoning_content", "content"):
            if delta.get(name):
                message[name] = (message.get(name) or "") + delta[name]
        for call in delta.get("tool_calls", ()):
            held = calls.setdefault(call["index"], {"id": call.get("id"), "type": "function", "function": {}})
            function = held["function"]
            function.setdefault("name", call["function"].get("name"))
            function["arguments"] = function.get("arguments", "") + call["function"].get("arguments", "")
    if calls:
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    choice = {"index": 0, "message": message, "finish_reason": finish, "stop_reason": matched}
    return {"id": "chatcmpl-x", "model": "m", "choices": [choice], "usage": usage}


def reassemble(raw: bytes) -> tuple[list[str], dict[str, Any]]:
    """Anthropic's events as a client accumulates them, checking their order on the way."""
    names: list[str] = []
    message: dict[str, Any] = {}
    partial: dict[int, str] = {}
    open_index = -1  # none open
    for frame in raw.decode().split("\n\n"):
        if not frame:
            continue
        head, data = frame.split("\n")
        name, event = head.removeprefix("event: "), orjson.loads(data.removeprefix("data: "))
        assert event["type"] == name
        names.append(name)
        if name == "message_start":
            message = event["message"]
        elif name == "content_block_start":
            assert open_index == -1
            assert event["index"] == len(message["content"])
            open_index = event["index"]
            message["content"].append(event["content_block"])
        elif name == "content_block_delta":
            assert event["index"] == open_index
            block, delta = message["content"][open_index], event["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            else:
                assert delta["type"] == "input_json_delta"
                partial[open_index] = partial.get(open_index, "") + delta["partial_json"]
        elif name == "content_block_stop":
            assert event["index"] == open_index
            if message["content"][open_index]["type"] == "tool_use":
                message["content"][open_index]["input"] = orjson.loads(partial.get(open_index) or "{}")
            open_index = -1
        elif name == "message_delta":
            assert open_index == -1
            message.update(event["delta"])
            message["usage"].update(event["usage"])
    return names, message


@settings(max_examples=300, deadline=None)
@given(
    chat_answers(),
    st.sampled_from(["stop", "length", "tool_calls", "content_filter"]),
    st.booleans(),
    st.none() | st.tuples(st.integers(0, 50), st.integers(0, 50), st.integers(0, 60)),
    st.lists(st.integers(1, 4), max_size=6),
)
def test_any_chat_stream_reassembles_to_the_plain_translation(
    answer: tuple[list[dict[str, Any]], list[str]],
    finish: str,
    names_a_stop: bool,
    counts: tuple[int, int, int] | None,
    batches: list[int],
) -> None:
    deltas, stops = answer
    matched = stops[0] if names_a_stop and stops and finish == "stop" else None
    usage: dict[str, Any] | None = None
    if counts is not None:
        prompt, completion, cached = counts
        usage = {"prompt_tokens": prompt, "completion_tokens": completion}
        usage["prompt_tokens_details"] = {"cached_tokens": min(cached, prompt)}
    payloads = [chunk(delta) for delta in deltas] + [chunk({}, finish, stop_reason=matched)]
    if usage is not None:
        payloads.append(orjson.dumps({"id": "chatcmpl-x", "model": "m", "choices": [], "usage": usage}))
    events = MessageEvents(stops, input_tokens=3)
    raw, start = b"", 0
    for size in [*batches, len(payloads)]:  # delivered in batches, as upstream reads come
        raw += events.frames(payloads[start : start + size])
        start += size
    raw += events.last()

    names, message = reassemble(raw)

    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert message == from_chat(whole(deltas, finish, matched, usage), stops)


def test_a_failure_midway_is_an_error_event_in_anthropics_shape() -> None:
    events = MessageEvents([])
    events.frames([chunk({"content": "partial"})])
    frame = events.error(GatewayError("upstream dropped", status=502, code="bad_gateway"))
    head, data = frame.decode().strip().split("\n")
    assert head == "event: error"
    assert orjson.loads(data.removeprefix("data: ")) == {
        "type": "error",
        "error": {"type": "api_error", "message": "upstream dropped"},
    }


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (502, "api_error"),
        (503, "overloaded_error"),
        (504, "api_error"),
    ],
)
def test_statuses_map_to_anthropics_error_types(status: int, kind: str) -> None:
    error = AnthropicError(GatewayError("x", status=status, headers={"retry-after": "3"}))
    assert orjson.loads(error.body()) == {"type": "error", "error": {"type": kind, "message": "x"}}
    assert (error.status, error.headers) == (status, {"retry-after": "3"})


VALID: dict[str, Any] = {
    "model": "m",
    "max_tokens": 5,
    "system": [{"type": "text", "text": "s"}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]},
    ],
    "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "tool", "name": "f"},
}


def paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key and index path inside `value`."""
    found: list[tuple[Any, ...]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        found += [(*at, key), *paths(inner, (*at, key))]
    return found


PATHS = paths(VALID)
REMOVED = object()


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """VALID with the value at any one path replaced by any JSON value, or removed."""
    body: Any = orjson.loads(orjson.dumps(VALID))
    *parents, last = draw(st.sampled_from(PATHS))
    holder = body
    for key in parents:
        holder = holder[key]
    value = draw(st.just(REMOVED) | JSON_VALUE)
    if value is REMOVED:
        del holder[last]
    else:
        holder[last] = value
    return dict(body)


@settings(max_examples=1000, deadline=None)
@given(mutated())
def test_any_body_is_translated_or_refused_naming_a_field(body: dict[str, Any]) -> None:
    refused: FieldError | None = None
    try:
        chat = to_chat(body)
    except FieldError as wrong:
        refused = wrong
    if refused is not None:
        assert refused.field
        assert refused.message.startswith(refused.field)
        return
    assert chat["model"] == body["model"]
