"""Output checks on a Responses stream a deployment sent itself (native pass-through).

The stream guard the chat stream uses, driven here by the Responses API's semantic events (through
`checks.EventGuard`): each text of each output item is one of its texts, of the kind
`responses_answer` says (an output text the answer; a refusal, a reasoning summary or text one of
their own; a function call's arguments JSON, its name a whole text checked as the item is added; a
custom tool call's input a text). So a text is held back only where a pattern could still complete:
a delta carries what may be released (one whose text is all held back is not sent), its `….done`
event carries the text as released (with the last of it in a delta of its own first), and so do
`content_part.done`, `output_item.done` and the final `response`. A deny, or a length cap, ends the
item where it stopped (its `output_item.done`, `status: "incomplete"`, with what was released) and
withholds every later output event; the upstream's closing event becomes `response.incomplete`
(`incomplete_details.reason` `content_filter`, or `max_output_tokens`) with the output as it was
sent. Events keep their order; once one is withheld or added, those after it are renumbered
(`sequence_number` counts the events sent). An event the checks leave as it was goes out as it came
(its bytes); a stream they change tells `NativeOutcome.changed`.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.pipeline.guarding import GuardedCall
from gateway.pipeline.native.checks import EventGuard
from gateway.pipeline.native.responses_answer import CALL_TEXTS, withhold
from policies.guardrails import StreamStep
from policies.guardrails.base import TextKind
from providers.base import CompletionStream, NativeOutcome

Event = dict[str, Any]
TextId = tuple[Any, str, Any]  # (output index, where in the item, which one)

# A delta event: where its text goes in the item, the index field naming which, its text's kind.
_DELTAS: dict[str, tuple[str, str | None, TextKind]] = {
    "response.output_text.delta": ("content", "content_index", "answer"),
    "response.refusal.delta": ("content", "content_index", "text"),
    "response.reasoning_text.delta": ("content", "content_index", "text"),
    "response.reasoning_summary_text.delta": ("summary", "summary_index", "text"),
    "response.function_call_arguments.delta": ("arguments", None, "json"),
    "response.custom_tool_call_input.delta": ("input", None, "text"),
}
# A text's done event: its delta event, and the field holding the whole text.
_DONES: dict[str, tuple[str, str]] = {
    "response.output_text.done": ("response.output_text.delta", "text"),
    "response.refusal.done": ("response.refusal.delta", "refusal"),
    "response.reasoning_text.done": ("response.reasoning_text.delta", "text"),
    "response.reasoning_summary_text.done": ("response.reasoning_summary_text.delta", "text"),
    "response.function_call_arguments.done": ("response.function_call_arguments.delta", "arguments"),
    "response.custom_tool_call_input.done": ("response.custom_tool_call_input.delta", "input"),
}
# A content part's text: its field, and its kind.
_PARTS: dict[str, tuple[str, TextKind]] = {
    "output_text": ("text", "answer"),
    "refusal": ("refusal", "text"),
    "reasoning_text": ("text", "text"),
    "summary_text": ("text", "text"),
}
_CLOSING = frozenset({"response.completed", "response.incomplete", "response.failed"})


class _Text:
    """One text the guard reads: its key, its kind, and where the text released so far is kept."""

    __slots__ = ("field", "holder", "key", "kind")

    def __init__(self, key: int, kind: TextKind, holder: dict[str, Any], field: str) -> None:
        self.key = key
        self.kind = kind
        self.holder = holder
        self.field = field
        holder[field] = ""  # what was released: a text arrives by its deltas

    @property
    def released(self) -> str:
        return str(self.holder[self.field])


class ResponsesGuardedStream(EventGuard):
    def __init__(self, stream: CompletionStream, guarded: GuardedCall, outcome: NativeOutcome) -> None:
        super().__init__(stream, guarded)
        self._outcome = outcome
        self._texts: dict[TextId, _Text] = {}
        self._items: dict[Any, dict[str, Any]] = {}  # by output index: each item as released so far
        self._done: dict[Any, dict[str, Any]] = {}  # by output index: each item as its done event sent it
        self._stopped: str | None = None  # why a check ended the answer: no output after it
        self._rewritten = False  # a check changed a text (or ended the answer): the final `response` says so
        self._next = 0  # the sequence number of the next event sent

    async def _check(self, payload: bytes, out: list[bytes]) -> None:
        event = orjson.loads(payload)  # the provider checked that each is a JSON object
        kind = event.get("type")
        if kind in _DELTAS:
            await self._delta(event, payload, out)
        elif kind in _DONES:
            await self._text_done(event, payload, out)
        elif kind == "response.output_item.added":
            await self._added(event, payload, out)
        elif kind in ("response.content_part.added", "response.reasoning_summary_part.added"):
            self._part_added(event, payload, out)
        elif kind in ("response.content_part.done", "response.reasoning_summary_part.done"):
            self._part_done(event, payload, out)
        elif kind == "response.output_item.done":
            await self._item_done(event, payload, out)
        elif kind in _CLOSING:
            self._closing(event, payload, out)
        elif self._stopped is None or "output_index" not in event:
            self._send(out, payload, event)  # created, in_progress, annotations, a tool's progress, error

    # -- sending ---------------------------------------------------------------------------------

    def _send(self, out: list[bytes], payload: bytes | None, event: Event, *, changed: bool = False) -> None:
        """`event` goes out as number `_next`: as it came (`payload`) unless it changed or is renumbered."""
        number = self._next
        self._next += 1
        if "sequence_number" in event and event["sequence_number"] != number:
            event["sequence_number"] = number
            changed = True
        if changed or payload is None:
            payload = orjson.dumps(event)
        out.append(payload)

    def _rewrite(self) -> None:
        """A check changed what the client gets of the answer (not only how its deltas split it)."""
        self._rewritten = True
        self._outcome.changed = True

    def _new(self, kind: str, **fields: Any) -> Event:
        return {"type": kind, "sequence_number": self._next, **fields}

    # -- items and parts ---------------------------------------------------------------------------

    async def _added(self, event: Event, payload: bytes, out: list[bytes]) -> None:
        item, index = event.get("item"), event.get("output_index")
        if self._stopped is not None or not isinstance(item, dict):
            if self._stopped is None:
                self._send(out, payload, event)
            return
        changed = False
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call") and isinstance(item.get("name"), str):
            name = item["name"]  # whole: clients do not join a name, so it is checked as it comes
            step = await self._whole(name, "text")
            if step.finish_reason is not None:  # the item is withheld before it starts
                self._stop(step.finish_reason, out)
                return
            changed = step.text != name
            if changed:
                item["name"] = step.text
                self._rewrite()
        self._send(out, payload, event, changed=changed)
        self._items[index] = item
        if kind == "function_call":
            self._text((index, "arguments", None), "json", item, "arguments")
        elif kind == "custom_tool_call":
            self._text((index, "input", None), "text", item, "input")

    def _part_added(self, event: Event, payload: bytes, out: list[bytes]) -> None:
        if self._stopped is not None:
            return
        self._send(out, payload, event)
        part, index = event.get("part"), event.get("output_index")
        found = _PARTS.get(str(part.get("type"))) if isinstance(part, dict) else None
        item = self._items.get(index)
        if found is None or item is None or not isinstance(part, dict):
            return
        summary = event["type"] == "response.reasoning_summary_part.added"
        where = "summary" if summary else "content"
        position = event.get("summary_index" if summary else "content_index")
        parts = item.setdefault(where, [])
        if isinstance(parts, list) and isinstance(position, int) and position >= 0:
            parts.extend([None] * (position + 1 - len(parts)))
            parts[position] = part
            self._text((index, where, position), found[1], part, found[0])

    def _part_done(self, event: Event, payload: bytes, out: list[bytes]) -> None:
        if self._stopped is not None:
            return
        summary = event["type"] == "response.reasoning_summary_part.done"
        position = event.get("summary_index" if summary else "content_index")
        text = self._texts.get((event.get("output_index"), "summary" if summary else "content", position))
        part = event.get("part")
        changed = False
        if text is not None and isinstance(part, dict) and part.get(text.field) != text.released:
            part[text.field] = text.released
            changed = True
            self._rewrite()
        self._send(out, payload, event, changed=changed)

    async def _item_done(self, event: Event, payload: bytes, out: list[bytes]) -> None:
        if self._stopped is not None:
            return
        index, item = event.get("output_index"), event.get("item")
        changed = False
        if isinstance(item, dict):
            added = self._items.get(index)
            for text_id, holder, field, kind in _item_texts(index, item):
                text = self._texts.get(text_id)
                value = holder[field]
                if text is not None:
                    checked = text.released
                elif text_id[1] == "name" and added is not None:  # checked as the item was added
                    checked = str(added.get("name", value))
                else:  # a text no delta carried: checked whole, now
                    step = await self._whole(value, kind)
                    if step.finish_reason is not None:
                        self._stop(step.finish_reason, out)
                        return
                    checked = step.text
                if checked != value:
                    holder[field] = checked
                    changed = True
                    self._rewrite()
            self._done[index] = item
        self._items.pop(index, None)
        self._send(out, payload, event, changed=changed)

    # -- texts ---------------------------------------------------------------------------------------

    def _text(self, text_id: TextId, kind: TextKind, holder: dict[str, Any], field: str) -> _Text:
        found = self._texts[text_id] = _Text(self._key(), kind, holder, field)
        return found

    async def _whole(self, value: str, kind: TextKind) -> StreamStep:
        """A text checked at once, as a whole: what may go out of it, or why nothing may."""
        key = self._key()
        step = self._guard.feed(key, value, kind)
        if step.finish_reason is not None:
            return step
        end = await self._guard.finish(key)
        return StreamStep(step.text + end.text, end.finish_reason, end.denied)

    def _delta_text(self, event: Event) -> _Text:
        where, position_field, kind = _DELTAS[event["type"]]
        index = event.get("output_index")
        position = event.get(position_field) if position_field else None
        text = self._texts.get((index, where, position))
        if text is None:  # a text whose part was not announced: kept apart, checked all the same
            text = self._text((index, where, position), kind, {}, "text")
        return text

    async def _delta(self, event: Event, payload: bytes, out: list[bytes]) -> None:
        if self._stopped is not None:
            return
        piece = event.get("delta")
        if not isinstance(piece, str):
            self._send(out, payload, event)
            return
        text = self._delta_text(event)
        step = self._guard.feed(text.key, piece, text.kind)
        text.holder[text.field] = text.released + step.text
        if step.text == piece:
            self._send(out, payload, event)
        elif step.text:
            event["delta"] = step.text
            if event.get("logprobs"):
                event["logprobs"] = []  # they spelled the text before the check
            self._send(out, payload, event, changed=True)
        if step.finish_reason is not None:
            self._stop(step.finish_reason, out)

    async def _text_done(self, event: Event, payload: bytes, out: list[bytes]) -> None:
        if self._stopped is not None:
            return
        delta_kind, field = _DONES[event["type"]]
        where, position_field, kind = _DELTAS[delta_kind]
        position = event.get(position_field) if position_field else None
        text = self._texts.get((event.get("output_index"), where, position))
        if text is None:  # no delta carried it: checked whole, now
            value = event.get(field)
            if not isinstance(value, str):
                self._send(out, payload, event)
                return
            step = await self._whole(value, kind)
            if step.finish_reason is not None:
                self._stop(step.finish_reason, out)
                return
            text = self._text((event.get("output_index"), where, position), kind, {}, "text")
            text.holder["text"] = step.text
            end = StreamStep()
        else:
            end = await self._guard.finish(text.key)
        if end.text:  # the last of it, held back until now
            text.holder[text.field] = text.released + end.text
            fields = {name: value for name, value in event.items() if name not in ("type", "sequence_number", field)}
            if delta_kind == "response.output_text.delta":
                fields["logprobs"] = []
            self._send(out, None, self._new(delta_kind, **fields, delta=end.text))
        if end.finish_reason is not None:
            self._stop(end.finish_reason, out)
            return
        changed = event.get(field) != text.released
        if changed:
            event[field] = text.released
            self._rewrite()
            if event.get("logprobs"):
                event["logprobs"] = []
        self._send(out, payload, event, changed=changed)

    # -- the end ---------------------------------------------------------------------------------------

    def _stop(self, reason: str, out: list[bytes]) -> None:
        """A check ended the answer: each item still open ends here, as released; no output after it."""
        self._stopped = reason
        self._rewrite()
        for index, item in list(self._items.items()):
            item["status"] = "incomplete"
            self._done[index] = item
            self._send(out, None, self._new("response.output_item.done", output_index=index, item=item))
        self._items.clear()

    def _closing(self, event: Event, payload: bytes, out: list[bytes]) -> None:
        response = event.get("response")
        changed = False
        if isinstance(response, dict):
            sent = [self._done[index] for index in sorted(self._done, key=_order)]
            if self._stopped is not None:
                withhold(response, self._stopped, sent)
                if event["type"] != "response.failed":
                    event["type"] = "response.incomplete"
                changed = True
            elif self._rewritten and isinstance(response.get("output"), list):
                output = response["output"]
                response["output"] = [self._done.get(index, item) for index, item in enumerate(output)]
                changed = True
        self._send(out, payload, event, changed=changed)


def _order(index: Any) -> int:
    return index if isinstance(index, int) else 0


def _item_texts(index: Any, item: dict[str, Any]) -> list[tuple[TextId, dict[str, Any], str, TextKind]]:
    """Each text of a whole output item, with the id its deltas gave it: where it sits, its kind."""
    kind = item.get("type")
    found: list[tuple[TextId, dict[str, Any], str, TextKind]] = []
    if kind in ("message", "reasoning"):
        for where in ("summary", "content"):
            parts = item.get(where)
            for position, part in enumerate(parts if isinstance(parts, list) else ()):
                known = _PARTS.get(str(part.get("type"))) if isinstance(part, dict) else None
                if known is not None and isinstance(part.get(known[0]), str):
                    found.append(((index, where, position), part, known[0], known[1]))
    elif kind in ("function_call", "custom_tool_call"):
        if isinstance(item.get("name"), str):
            found.append(((index, "name", None), item, "name", "text"))
        field, text_kind = CALL_TEXTS[kind]
        if isinstance(item.get(field), str):
            found.append(((index, field, None), item, field, text_kind))
    return found
