"""A chat stream as Anthropic's stream events, in Anthropic's order.

`message_start` and a `ping` on the first chunk; then per content block `content_block_start`,
its deltas (`thinking_delta` from `reasoning_content`, `text_delta` from `content`,
`input_json_delta` from a tool call's streamed `arguments`), `content_block_stop` when the next
kind of content begins; at the end `message_delta` (stop_reason, stop_sequence, usage) and
`message_stop`. A failure after the stream began is an `event: error`.

The blocks are opened in the order the upstream sends their content, so a stream that sends its
reasoning, then its text, then its tool calls (what upstreams do) reassembles to exactly the
message `answer.from_chat` makes of the same answer sent whole.

An Anthropic deployment's own events (native pass-through) are relayed as they came, each event's
data as the upstream sent it.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.api.errors import GatewayError
from gateway.api.messages.answer import message_id, stop_reason, usage
from gateway.api.messages.errors import error_event

PING = b'event: ping\ndata: {"type":"ping"}\n\n'
_NATIVE = b'{"type":"'  # how an Anthropic event's data begins
_TEXT_ONLY = frozenset({"role", "content"})  # a chat delta's keys when it carries text alone
# A block's deltas: their type and the field holding the text; the head each is written after.
_DELTAS = {"text": (b"text_delta", b"text"), "thinking": (b"thinking_delta", b"thinking")}
_DELTAS["tool_use"] = (b"input_json_delta", b"partial_json")
_DELTA_HEAD = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,"delta":{"type":"%s","%s":'
# The frame's head of each of Anthropic's stream events, made once.
_HEADS = {
    name: b"event: " + name + b"\ndata: "
    for name in (
        b"message_start",
        b"content_block_start",
        b"ping",
        b"content_block_delta",
        b"content_block_stop",
        b"message_delta",
        b"message_stop",
        b"error",
    )
}


def event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


class MessageEvents:
    """One stream's translation: chat chunks in, Anthropic event frames out (`Framing` of the relay)."""

    def __init__(self, stops: list[str], input_tokens: int = 0) -> None:
        self._stops = stops
        self._input_tokens = input_tokens  # the estimate, for message_start: the upstream counts at the end
        self._started = False
        self._index = -1  # of the open block
        self._open: str | None = None  # "thinking", "text" or the chat index of a tool call ("tool:0")
        self._finish: Any = None
        self._matched: Any = None
        self._usage: Any = None
        self._native = False  # Anthropic's own events (native pass-through): relayed as they came
        self._head = b""  # the open block's delta event, up to its text

    def frames(self, payloads: list[bytes]) -> bytes:
        out: list[bytes] = []
        for payload in payloads:
            end = payload.find(b'"', 9) if payload.startswith(_NATIVE) else -1
            head = _HEADS.get(payload[9:end]) if end > 9 else None
            if head is not None and b"\n" not in payload:  # the usual Anthropic event: no name to check
                self._native = True
                out += (head, payload, b"\n\n")
                continue
            if end > 9 and payload[9:end].replace(b"_", b"").isalpha() and b"\n" not in payload:
                # An Anthropic event as Anthropic writes it, `type` first (the provider checked it is
                # a JSON object): its data as the upstream sent it, without parsing it again.
                self._native = True
                out.append(b"event: " + payload[9:end] + b"\ndata: " + payload + b"\n\n")
                continue
            try:
                chunk = orjson.loads(payload)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(chunk, dict):
                continue
            kind = chunk.get("type")
            if "object" in chunk or not isinstance(kind, str):
                self._chunk(chunk, out)  # a chat chunk (it names its `object`)
            elif kind.isascii() and kind.replace("_", "").isalpha():
                # An Anthropic event written otherwise (spaces, `type` not first): one data line.
                self._native = True
                out.append(b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(chunk) + b"\n\n")
            # else: named as no Anthropic event is (a name that could not go out as an SSE event
            # name as sent): not written; the SDKs skip events they do not know anyway.
        return b"".join(out)

    def last(self) -> bytes:
        if self._native:
            return b""  # the upstream's own message_stop has gone out
        out: list[bytes] = []
        if not self._started:
            self._start({}, out)
        self._close(out)
        reason, sequence = stop_reason(self._finish or "stop", self._matched, self._stops)
        out.append(
            event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": reason, "stop_sequence": sequence},
                    "usage": usage(self._usage),
                },
            )
        )
        out.append(event("message_stop", {"type": "message_stop"}))
        return b"".join(out)

    def error(self, error: GatewayError) -> bytes:
        return error_event(error)

    def _chunk(self, chunk: dict[str, Any], out: list[bytes]) -> None:
        if not self._started:
            self._start(chunk, out)
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # a Messages answer has one choice: the first
            delta = choice.get("delta") or {}
            if delta.keys() <= _TEXT_ONLY:  # the usual chunk: a piece of text, nothing else to look for
                text = delta.get("content")
                if isinstance(text, str) and text:
                    if self._open != "text":
                        self._open_block("text", {"type": "text", "text": ""}, out)
                    out.append(self._delta(text))
            else:
                self._rich_delta(delta, out)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
                self._matched = choice.get("stop_reason")
                if delta.get("refusal"):
                    self._finish = "content_filter"

    def _rich_delta(self, delta: dict[str, Any], out: list[bytes]) -> None:
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            if self._open != "thinking":
                self._open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""}, out)
            out.append(self._delta(reasoning))
        for name in ("content", "refusal"):
            text = delta.get(name)
            if isinstance(text, str) and text:
                self._text(text, out)
        for call in delta.get("tool_calls") or ():
            self._tool_call(call, out)

    def _text(self, text: str, out: list[bytes]) -> None:
        if self._open != "text":
            self._open_block("text", {"type": "text", "text": ""}, out)
        out.append(self._delta(text))

    def _tool_call(self, call: dict[str, Any], out: list[bytes]) -> None:
        key = f"tool:{call.get('index', 0)}"
        function = call.get("function") or {}
        if self._open != key:
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": call.get("id") or "",
                "name": function.get("name") or "",
                "input": {},
            }
            self._open_block(key, block, out)
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            out.append(self._delta(arguments))

    def _start(self, chunk: dict[str, Any], out: list[bytes]) -> None:
        self._started = True
        message: dict[str, Any] = {
            "id": message_id(chunk.get("id")),
            "type": "message",
            "role": "assistant",
            "model": chunk.get("model") or "",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": self._input_tokens,
                "output_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
        out.append(event("message_start", {"type": "message_start", "message": message}))
        out.append(PING)

    def _open_block(self, key: str, block: dict[str, Any], out: list[bytes]) -> None:
        if self._open == key:
            return
        self._close(out)
        self._index += 1
        self._open = key
        kind, field = _DELTAS[block["type"]]
        self._head = _DELTA_HEAD % (self._index, kind, field)
        out.append(
            event("content_block_start", {"type": "content_block_start", "index": self._index, "content_block": block})
        )

    def _close(self, out: list[bytes]) -> None:
        if self._open is not None:
            out.append(event("content_block_stop", {"type": "content_block_stop", "index": self._index}))
            self._open = None

    def _delta(self, value: str) -> bytes:
        # The most frequent event, written directly: the open block's head, then the text as JSON.
        return self._head + orjson.dumps(value) + b"}}\n\n"
