"""Output checks on an Anthropic deployment's own stream events (native pass-through).

The stream guard the chat stream uses (`policies.guardrails.StreamGuard`, driven for chat chunks by
`answer_guarding.GuardedStream`), driven here by Anthropic's events: each content block's text is
one of its texts, of the kind `answer` says (text deltas the answer, thinking deltas a text of
their own, a `tool_use` block's `input_json_delta` pieces JSON, its name a whole text checked as
it comes). So a text is held back only where a pattern could still complete, redacted in place,
and what was held is released with its block's end (a thinking block's before its signature).
A deny, or a length cap, ends the open block where it stopped and withholds every later content
event; the upstream's own `message_delta` then carries the stop reason (`refusal`, `max_tokens`)
with its usage, and `message_stop` ends the stream as usual. An event the checks leave as it was
goes out as it came (its bytes); Anthropic's order is kept throughout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from gateway.pipeline.guarding import GuardedCall
from gateway.pipeline.native.answer import BLOCK_TEXTS, STOP_REASONS
from gateway.pipeline.native.checks import EventGuard
from policies.guardrails import StreamStep
from policies.guardrails.base import TextKind
from providers.base import CompletionStream

_DELTAS = {"text": "text_delta", "thinking": "thinking_delta"}


@dataclass(frozen=True, slots=True)
class _Block:
    """A content block whose text the guard reads: its guard key, and how its deltas carry it."""

    key: int
    delta: str  # the delta type (`text_delta`, `thinking_delta`, `input_json_delta`)
    field: str  # the delta's field holding the text
    kind: TextKind


class NativeGuardedStream(EventGuard):
    def __init__(self, stream: CompletionStream, guarded: GuardedCall) -> None:
        super().__init__(stream, guarded)
        self._blocks: dict[Any, _Block] = {}  # by the block's index: those still open
        self._stopped: str | None = None  # the stop reason a check imposed: no content after it

    async def _check(self, payload: bytes, out: list[bytes]) -> None:
        event = orjson.loads(payload)  # the provider checked that each is a JSON object
        kind = event.get("type")
        if kind == "content_block_delta":
            await self._delta(event, payload, out)
        elif kind == "content_block_start":
            await self._start(event, payload, out)
        elif kind == "content_block_stop":
            if self._stopped is None:
                await self._release(event.get("index"), out)
            if self._stopped is None:  # (a check may have ended the block as it finished)
                out.append(payload)
        elif kind == "message_delta" and self._stopped is not None:
            delta = event.get("delta")
            event["delta"] = {**(delta if isinstance(delta, dict) else {}), "stop_reason": self._stopped}
            event["delta"]["stop_sequence"] = None  # a check stopped it, not a stop sequence
            out.append(orjson.dumps(event))
        else:  # message_start, ping, message_stop, error: nothing the checks read
            out.append(payload)

    async def _start(self, event: dict[str, Any], payload: bytes, out: list[bytes]) -> None:
        if self._stopped is not None:
            return
        block = event.get("content_block")
        kind = block.get("type") if isinstance(block, dict) else None
        index = event.get("index")
        if isinstance(block, dict) and kind in BLOCK_TEXTS:
            field, text_kind = BLOCK_TEXTS[kind]
            self._blocks[index] = _Block(self._key(), _DELTAS[kind], field, text_kind)
            if block.get(field):  # Anthropic starts them empty; any text here is the block's first
                text = block[field]
                block[field] = ""
                out.append(orjson.dumps(event))
                delta = {"type": "content_block_delta", "index": index, "delta": {"type": _DELTAS[kind], field: text}}
                await self._delta(delta, orjson.dumps(delta), out)
                return
        elif isinstance(block, dict) and kind == "tool_use":
            name = block.get("name")
            if isinstance(name, str):  # whole: clients do not join a name, so it is checked as it comes
                key = self._key()
                step = self._guard.feed(key, name, "text")
                end = StreamStep() if step.finish_reason is not None else await self._guard.finish(key)
                reason = step.finish_reason or end.finish_reason
                if reason is not None:  # the block is withheld before it starts
                    self._stopped = STOP_REASONS.get(reason, "refusal")
                    return
                checked = step.text + end.text
                if checked != name:
                    block["name"] = checked
                    payload = orjson.dumps(event)
            self._blocks[index] = _Block(self._key(), "input_json_delta", "partial_json", "json")
        out.append(payload)

    async def _delta(self, event: dict[str, Any], payload: bytes, out: list[bytes]) -> None:
        if self._stopped is not None:
            return
        index = event.get("index")
        block = self._blocks.get(index)
        delta = event.get("delta")
        if block is None or not isinstance(delta, dict):
            out.append(payload)
            return
        if delta.get("type") == "signature_delta":  # the thinking is whole: the rest of it first
            await self._release(index, out)
            if self._stopped is None:
                out.append(payload)
            return
        text = delta.get(block.field)
        if delta.get("type") != block.delta or not isinstance(text, str):
            out.append(payload)  # e.g. a citations_delta: nothing the checks read
            return
        step = self._guard.feed(block.key, text, block.kind)
        if step.text == text:
            out.append(payload)
        elif step.text:
            delta[block.field] = step.text
            out.append(orjson.dumps(event))
        if step.finish_reason is not None:
            self._end(index, step.finish_reason, out)

    async def _release(self, index: Any, out: list[bytes]) -> None:
        """The block ended (or its signature came): what the guard still holds of its text."""
        block = self._blocks.pop(index, None)
        if block is None:
            return
        end = await self._guard.finish(block.key)
        if end.text:
            delta = {"type": block.delta, block.field: end.text}
            out.append(orjson.dumps({"type": "content_block_delta", "index": index, "delta": delta}))
        if end.finish_reason is not None:
            self._end(index, end.finish_reason, out)

    def _end(self, index: Any, reason: str, out: list[bytes]) -> None:
        """A check ended the answer inside block `index`: the block ends here, and so does the content."""
        self._blocks.pop(index, None)
        self._stopped = STOP_REASONS.get(reason, "refusal")
        out.append(orjson.dumps({"type": "content_block_stop", "index": index}))
