"""A chat completion stream as the Responses API's semantic events, each with the next
`sequence_number`: created, in_progress, then per output item added / part added / deltas /
done, and completed (or incomplete). Reassembling the events gives the same `response` as
`Bridge.response` gives for the assembled chat completion (property-tested)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.api.responses.bridge import (
    Bridge,
    finished,
    message_item,
    output_part,
    reasoning_item,
    usage,
)
from gateway.api.responses.items import Item

Event = dict[str, Any]


@dataclass(slots=True)
class _Call:
    index: int  # output index
    item: Item
    arguments: list[str] = field(default_factory=list)


class EventTranslator:
    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge
        self.sequence = 0
        self.output: list[Item | None] = []  # by output index; None while the item is open
        self._text: tuple[int, Item, list[str], str] | None = None  # index, item, pieces, part type
        self._thought: tuple[int, Item, list[str]] | None = None
        self._calls: dict[int, _Call] = {}  # by the chat tool call's index
        self._finish: Any = None
        self._usage: Any = None
        self.final: dict[str, Any] | None = None

    def _event(self, kind: str, **fields: Any) -> Event:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def start(self) -> list[Event]:
        return [
            self._event("response.created", response=self.bridge.skeleton("in_progress")),
            self._event("response.in_progress", response=self.bridge.skeleton("in_progress")),
        ]

    def feed(self, chunk: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        if chunk.get("usage") is not None:
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str) and thought:
                events += self._think(thought)
            for kind, value in (("output_text", delta.get("content")), ("refusal", delta.get("refusal"))):
                if isinstance(value, str) and value:
                    events += self._say(kind, value)
            for call in delta.get("tool_calls") or []:
                if isinstance(call, dict):
                    events += self._call(call)
            if choice.get("finish_reason") is not None:
                self._finish = choice["finish_reason"]
        return events

    def _open(self, item: Item) -> tuple[int, list[Event]]:
        self.output.append(None)
        index = len(self.output) - 1
        return index, [self._event("response.output_item.added", output_index=index, item=item)]

    def _think(self, text: str) -> list[Event]:
        events: list[Event] = []
        if self._thought is None:
            events += self._close_text()
            item = {"id": self.bridge.item_id("rs"), "type": "reasoning", "summary": [], "content": []}
            index, events = self._open(item)
            self._thought = (index, item, [])
        index, item, pieces = self._thought
        pieces.append(text)
        return [
            *events,
            self._event(
                "response.reasoning_text.delta", item_id=item["id"], output_index=index, content_index=0, delta=text
            ),
        ]

    def _say(self, kind: str, text: str) -> list[Event]:
        events = self._close_thought()
        if self._text is not None and self._text[3] != kind:
            events += self._close_text()
        if self._text is None:
            item = message_item(self.bridge.item_id("msg"), [], "in_progress")
            index, opened = self._open(item)
            part = output_part("", None) if kind == "output_text" else {"type": "refusal", "refusal": ""}
            events += [
                *opened,
                self._event(
                    "response.content_part.added", item_id=item["id"], output_index=index, content_index=0, part=part
                ),
            ]
            self._text = (index, item, [], kind)
        index, item, pieces, _ = self._text
        pieces.append(text)
        name = "response.output_text.delta" if kind == "output_text" else "response.refusal.delta"
        extra: dict[str, Any] = {"logprobs": []} if kind == "output_text" else {}
        return [
            *events,
            self._event(name, item_id=item["id"], output_index=index, content_index=0, delta=text, **extra),
        ]

    def _call(self, delta: dict[str, Any]) -> list[Event]:
        events = self._close_thought() + self._close_text()
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
            index, opened = self._open(item)
            events += opened
            found = self._calls[position] = _Call(index, item)
        piece = function.get("arguments")
        if isinstance(piece, str) and piece:
            found.arguments.append(piece)
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=found.item["id"],
                    output_index=found.index,
                    delta=piece,
                )
            )
        return events

    def _close_thought(self) -> list[Event]:
        if self._thought is None:
            return []
        index, item, pieces = self._thought
        self._thought = None
        text = "".join(pieces)
        done = reasoning_item(item["id"], text)
        self.output[index] = done
        return [
            self._event(
                "response.reasoning_text.done", item_id=item["id"], output_index=index, content_index=0, text=text
            ),
            self._event("response.output_item.done", output_index=index, item=done),
        ]

    def _close_text(self, status: str = "completed") -> list[Event]:
        if self._text is None:
            return []
        index, item, pieces, kind = self._text
        self._text = None
        text = "".join(pieces)
        part = output_part(text, None) if kind == "output_text" else output_part(None, text)
        if kind == "output_text":
            done_event = self._event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
        else:
            done_event = self._event(
                "response.refusal.done", item_id=item["id"], output_index=index, content_index=0, refusal=text
            )
        done = message_item(item["id"], [part], status)
        self.output[index] = done
        return [
            done_event,
            self._event(
                "response.content_part.done", item_id=item["id"], output_index=index, content_index=0, part=part
            ),
            self._event("response.output_item.done", output_index=index, item=done),
        ]

    def finish(self) -> list[Event]:
        """The closing events, the last being response.completed (or .incomplete)."""
        cut = self._finish in ("length", "content_filter")
        events = self._close_thought() + self._close_text("incomplete" if cut else "completed")
        for call in sorted(self._calls.values(), key=lambda found: found.index):
            arguments = "".join(call.arguments)
            done = {**call.item, "arguments": arguments, "status": "completed"}
            self.output[call.index] = done
            events.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=call.item["id"],
                    output_index=call.index,
                    arguments=arguments,
                    name=call.item["name"],
                )
            )
            events.append(self._event("response.output_item.done", output_index=call.index, item=done))
        self._calls.clear()
        output = [item for item in self.output if item is not None]
        self.final = finished(self.bridge.skeleton("completed"), output, usage(self._usage), self._finish)
        kind = "response.completed" if self.final["status"] == "completed" else "response.incomplete"
        return [*events, self._event(kind, response=self.final)]

    def error(self, code: str | None, message: str) -> list[Event]:
        """An upstream failure after the stream began: the `error` event, then response.failed."""
        failed = self.bridge.skeleton("failed")
        failed["error"] = {"code": "server_error", "message": message}
        failed["output"] = [item for item in self.output if item is not None]
        return [
            self._event("error", code=code, message=message, param=None),
            self._event("response.failed", response=failed),
        ]
