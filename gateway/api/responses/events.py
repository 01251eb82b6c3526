"""A chat completion stream as the Responses API's semantic events, each with the next
`sequence_number`: created, in_progress, then per output item added / part added / deltas /
done, and completed (or incomplete). Reassembling the events gives the same `response` as
`Bridge.response` gives for the assembled chat completion (property-tested).

Events come out encoded (the SSE payloads). The deltas, most of a stream, are written from byte
templates made once per output item: no dict and no whole-event encoding per delta, only the
delta's own text is encoded. A message's text part is opened and closed from byte templates too
(its whole text encoded once for the three closing events and the final response). The `response`
that created, in_progress and the last event carry is encoded once each (created and in_progress
share theirs; the last one is made from their skeleton).

(Splicing a chunk's content into its delta without decoding the chunk was tried: finding and
checking it in the bytes costs more than orjson's parse of a chunk, in the bench as in isolation.)"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.api.responses.bridge import (
    Bridge,
    finished,
    message_item,
    output_part,
    reasoning_item,
    usage,
)
from gateway.api.responses.items import Item

_dumps = orjson.dumps
_DELTA_KINDS = {
    "output_text": b"response.output_text.delta",
    "refusal": b"response.refusal.delta",
    "reasoning_text": b"response.reasoning_text.delta",
}


@dataclass(slots=True)
class _Open:
    """An output item being streamed, and the template of its deltas: `head` + sequence number +
    `middle` + the encoded delta + `tail`."""

    index: int  # output index
    item: Item
    kind: str  # output_text, refusal, reasoning_text or function_call
    head: bytes
    middle: bytes
    tail: bytes
    item_id: bytes  # encoded
    pieces: list[str] = field(default_factory=list)


def _opened(index: int, item: Item, kind: str) -> _Open:
    item_id = orjson.dumps(item["id"])
    if kind == "function_call":
        head = b'{"type":"response.function_call_arguments.delta","sequence_number":'
        middle = b',"item_id":%s,"output_index":%d,"delta":' % (item_id, index)
        return _Open(index, item, kind, head, middle, b"}", item_id)
    head = b'{"type":"%s","sequence_number":' % _DELTA_KINDS[kind]
    middle = b',"item_id":%s,"output_index":%d,"content_index":0,"delta":' % (item_id, index)
    return _Open(index, item, kind, head, middle, b',"logprobs":[]}' if kind == "output_text" else b"}", item_id)


# A message's output_text part and item, and the events that open and close them (as `_event` would
# encode them: the text encoded once for the three closing events and the final response).
_TEXT_PART = b'{"type":"output_text","text":%s,"annotations":[],"logprobs":[]}'
_MESSAGE = b'{"id":%s,"type":"message","role":"assistant","status":"%s","content":[%s]}'
_ITEM_ADDED = b'{"type":"response.output_item.added","sequence_number":%d,"output_index":%d,"item":%s}'
_PART_ADDED = (
    b'{"type":"response.content_part.added","sequence_number":%d,"item_id":%s,"output_index":%d,'
    b'"content_index":0,"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]}}'
)
_TEXT_DONE = (
    b'{"type":"response.output_text.done","sequence_number":%d,"item_id":%s,"output_index":%d,'
    b'"content_index":0,"text":%s,"logprobs":[]}'
)
_PART_DONE = (
    b'{"type":"response.content_part.done","sequence_number":%d,"item_id":%s,"output_index":%d,'
    b'"content_index":0,"part":%s}'
)
_ITEM_DONE = b'{"type":"response.output_item.done","sequence_number":%d,"output_index":%d,"item":%s}'


class EventTranslator:
    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge
        self.sequence = 0
        # By output index (a message's encoded already), None while the item is open.
        self.output: list[Item | orjson.Fragment | None] = []
        self._text: _Open | None = None  # a message's output_text or refusal part
        self._thought: _Open | None = None
        self._calls: dict[int, _Open] = {}  # by the chat tool call's index
        self._finish: Any = None
        self._usage: Any = None
        self._out: list[bytes] = []  # the events made since the last call returned them
        self._skeleton: dict[str, Any] | None = None  # the `response` created and in_progress carry
        self.final: dict[str, Any] | None = None
        self.final_json = b""  # `final`, encoded (the last event's `response`, and what is stored)

    def _event(self, kind: str, **fields: Any) -> None:
        self._out.append(orjson.dumps({"type": kind, "sequence_number": self.sequence, **fields}))
        self.sequence += 1

    def _carrying(self, kind: bytes, response: bytes) -> None:
        """An event whose only field is the `response`, already encoded."""
        self._out.append(b'{"type":"%s","sequence_number":%d,"response":%s}' % (kind, self.sequence, response))
        self.sequence += 1

    def _delta(self, found: _Open, text: str) -> None:
        found.pieces.append(text)
        self._out.append(b"%s%d%s%s%s" % (found.head, self.sequence, found.middle, orjson.dumps(text), found.tail))
        self.sequence += 1

    def _made(self) -> list[bytes]:
        out, self._out = self._out, []
        return out

    def start(self) -> list[bytes]:
        self._skeleton = self.bridge.skeleton("in_progress")
        skeleton = orjson.dumps(self._skeleton)
        self._carrying(b"response.created", skeleton)
        self._carrying(b"response.in_progress", skeleton)
        return self._made()

    def feed(self, chunk: dict[str, Any]) -> list[bytes]:
        self._feed(chunk)
        return self._made()

    def feed_payloads(self, payloads: list[bytes]) -> list[bytes]:
        """`feed` for each chunk of one read of the upstream, as it sent them (encoded)."""
        return self.feed_chunks(map(orjson.loads, payloads))

    def feed_chunks(self, chunks: Iterable[Any]) -> list[bytes]:
        """`feed` for each chunk of one read of the upstream (parsed)."""
        out = self._out
        for chunk in chunks:
            # Most of a stream, inline (as `_feed` reads it): a chunk whose one choice adds a piece to
            # the text being written, nothing else (no usage, no finish).
            text = self._text
            choices = chunk.get("choices")
            if (
                text is not None
                and text.kind == "output_text"
                and type(choices) is list
                and len(choices) == 1
                and chunk.get("usage") is None
            ):
                choice = choices[0]
                if type(choice) is dict and choice.get("finish_reason") is None and choice.get("index", 0) == 0:
                    delta = choice.get("delta")
                    content = delta.get("content") if type(delta) is dict and len(delta) == 1 else None
                    if type(content) is str:
                        if content:  # `_delta`, inline
                            text.pieces.append(content)
                            out.append(
                                b"%s%d%s%s%s" % (text.head, self.sequence, text.middle, _dumps(content), text.tail)
                            )
                            self.sequence += 1
                        continue
            self._feed(chunk)
        self._out = []
        return out

    def _feed(self, chunk: dict[str, Any]) -> None:
        if chunk.get("usage") is not None:
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text = self._text
            content = delta.get("content")
            if len(delta) == 1 and text is not None and text.kind == "output_text" and type(content) is str:
                if content:  # most of a stream: one more piece of the text being written
                    self._delta(text, content)
            else:
                self._changes(delta, content)
            if choice.get("finish_reason") is not None:
                self._finish = choice["finish_reason"]

    def _changes(self, delta: dict[str, Any], content: Any) -> None:
        thought = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(thought, str) and thought:
            self._think(thought)
        if isinstance(content, str) and content:
            self._say("output_text", content)
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self._say("refusal", refusal)
        for call in delta.get("tool_calls") or ():
            if isinstance(call, dict):
                self._call(call)

    def _open(self, item: Item, kind: str) -> _Open:
        self.output.append(None)
        index = len(self.output) - 1
        self._event("response.output_item.added", output_index=index, item=item)
        return _opened(index, item, kind)

    def _think(self, text: str) -> None:
        if self._thought is None:
            self._close_text()
            item = {"id": self.bridge.item_id("rs"), "type": "reasoning", "summary": [], "content": []}
            self._thought = self._open(item, "reasoning_text")
        self._delta(self._thought, text)

    def _say(self, kind: str, text: str) -> None:
        self._close_thought()
        if self._text is not None and self._text.kind != kind:
            self._close_text()
        if self._text is None and kind == "output_text":  # the usual opening: from templates
            item = message_item(self.bridge.item_id("msg"), [], "in_progress")
            self.output.append(None)
            opened = self._text = _opened(len(self.output) - 1, item, kind)
            sequence, index, item_id = self.sequence, opened.index, opened.item_id
            self._out += (
                _ITEM_ADDED % (sequence, index, _MESSAGE % (item_id, b"in_progress", b"")),
                _PART_ADDED % (sequence + 1, item_id, index),
            )
            self.sequence += 2
        elif self._text is None:  # a refusal
            item = message_item(self.bridge.item_id("msg"), [], "in_progress")
            self._text = opened = self._open(item, kind)
            part = {"type": "refusal", "refusal": ""}
            self._event(
                "response.content_part.added", item_id=item["id"], output_index=opened.index, content_index=0, part=part
            )
        self._delta(self._text, text)

    def _call(self, delta: dict[str, Any]) -> None:
        self._close_thought()
        self._close_text()
        position = delta.get("index", 0)
        function = delta.get("function") or {}
        found = self._calls.get(position)
        if found is None:
            chat_call = {
                "id": delta.get("id", ""),
                "type": "function",
                "function": {"name": function.get("name", ""), "arguments": ""},
            }
            item = {**self.bridge.call_item(self.bridge.item_id("fc"), chat_call), "status": "in_progress"}
            found = self._calls[position] = self._open(item, "function_call")
        piece = function.get("arguments")
        if isinstance(piece, str) and piece:
            self._delta(found, piece)

    def _close_thought(self) -> None:
        if self._thought is None:
            return
        found, self._thought = self._thought, None
        item_id, index = found.item["id"], found.index
        text = "".join(found.pieces)
        done = reasoning_item(item_id, text)
        self.output[index] = done
        self._event("response.reasoning_text.done", item_id=item_id, output_index=index, content_index=0, text=text)
        self._event("response.output_item.done", output_index=index, item=done)

    def _close_text(self, status: str = "completed") -> None:
        if self._text is None:
            return
        found, self._text = self._text, None
        item_id, index = found.item["id"], found.index
        text = "".join(found.pieces)
        if found.kind == "output_text":  # the usual: from templates
            encoded, sequence = _dumps(text), self.sequence
            part_json = _TEXT_PART % encoded
            done_json = _MESSAGE % (found.item_id, status.encode(), part_json)
            self._out += (
                _TEXT_DONE % (sequence, found.item_id, index, encoded),
                _PART_DONE % (sequence + 1, found.item_id, index, part_json),
                _ITEM_DONE % (sequence + 2, index, done_json),
            )
            self.sequence += 3
            self.output[index] = orjson.Fragment(done_json)
            return
        part = output_part(None, text)  # a refusal
        self._event("response.refusal.done", item_id=item_id, output_index=index, content_index=0, refusal=text)
        done = message_item(item_id, [part], status)
        self.output[index] = done
        self._event("response.content_part.done", item_id=item_id, output_index=index, content_index=0, part=part)
        self._event("response.output_item.done", output_index=index, item=done)

    def finish(self) -> list[bytes]:
        """The closing events, the last being response.completed (or .incomplete)."""
        cut = self._finish in ("length", "content_filter")
        self._close_thought()
        self._close_text("incomplete" if cut else "completed")
        for call in sorted(self._calls.values(), key=lambda found: found.index):
            arguments = "".join(call.pieces)
            done = {**call.item, "arguments": arguments, "status": "completed"}
            self.output[call.index] = done
            self._event(
                "response.function_call_arguments.done",
                item_id=call.item["id"],
                output_index=call.index,
                arguments=arguments,
                name=call.item["name"],
            )
            self._event("response.output_item.done", output_index=call.index, item=done)
        self._calls.clear()
        output = [item for item in self.output if item is not None]
        # The skeleton created carried (what it echoes was final by then), its status set by `finished`.
        skeleton = self.bridge.skeleton("completed") if self._skeleton is None else dict(self._skeleton)
        self.final = finished(skeleton, output, usage(self._usage), self._finish)
        self.final_json = orjson.dumps(self.final)
        completed = self.final["status"] == "completed"
        self._carrying(b"response.completed" if completed else b"response.incomplete", self.final_json)
        return self._made()

    def error(self, code: str | None, message: str) -> list[bytes]:
        """An upstream failure after the stream began: the `error` event, then response.failed."""
        failed = self.bridge.skeleton("failed")
        failed["error"] = {"code": "server_error", "message": message}
        failed["output"] = [item for item in self.output if item is not None]
        self._event("error", code=code, message=message, param=None)
        self._event("response.failed", response=failed)
        return self._made()
