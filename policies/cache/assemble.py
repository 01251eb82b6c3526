"""Rebuild the non-streamed answer from a Completions stream, so a streamed miss can be stored.

Fed the `data:` payloads as they are relayed, the assembler concatenates each choice's text,
merges its logprobs lists (tokens, token_logprobs, top_logprobs, text_offset, and any other list),
keeps its finish_reason and the usage chunk. `finish()` is called when `[DONE]` arrived; it
returns the body a non-streamed call would have returned, or None when the stream is not a
complete answer: an error event, a malformed chunk, a choice without finish_reason, a missing
choice, or more text than the entry bound allows. A stream that never reaches `[DONE]` never
gets `finish()` called, so an aborted or cut stream is never stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

DONE = b"[DONE]"
META_FIELDS = ("id", "created", "model", "system_fingerprint")


@dataclass(slots=True)
class _Choice:
    texts: list[str] = field(default_factory=list)
    logprobs: dict[str, Any] | None = None
    finish_reason: str | None = None


class StreamAssembler:
    def __init__(self, *, expected_choices: int | None = None, max_bytes: int | None = None) -> None:
        self.expected_choices = expected_choices
        self.max_bytes = max_bytes
        self.failure: str | None = None  # why the stream cannot be stored, once known
        self._meta: dict[str, Any] = {}
        self._choices: dict[int, _Choice] = {}
        self._usage: dict[str, Any] | None = None
        self._size = 0
        self._done = False

    def feed(self, payloads: Iterable[bytes]) -> None:
        """Consume one batch of `data:` payloads (a `[DONE]` payload counts as `finish()`'s signal)."""
        for payload in payloads:
            if self.failure is not None:
                return
            if payload == DONE:
                self._done = True
                continue
            try:
                event = orjson.loads(payload)
            except orjson.JSONDecodeError:
                self._fail("a chunk is not JSON")
                continue
            self.feed_event(event)

    def feed_event(self, event: Any) -> None:
        """Consume one already parsed chunk."""
        if self.failure is not None:
            return
        if self._done:
            return self._fail("a chunk after [DONE]")
        if not isinstance(event, Mapping) or "error" in event:
            return self._fail("an error event")
        for name in META_FIELDS:
            if event.get(name) is not None:
                self._meta.setdefault(name, event[name])
        usage = event.get("usage")
        if isinstance(usage, Mapping):
            self._usage = dict(usage)
        choices = event.get("choices", [])
        if not isinstance(choices, list):
            return self._fail("choices is not a list")
        for choice in choices:
            self._add(choice)

    def finish(self) -> dict[str, Any] | None:
        """The stream ended with `[DONE]`: the complete body, or None if it cannot be stored."""
        self._done = True
        if self.failure is None:
            self._check_complete()
        if self.failure is not None:
            return None
        body: dict[str, Any] = {
            "id": self._meta.get("id"),
            "object": "text_completion",
            "created": self._meta.get("created"),
            "model": self._meta.get("model"),
        }
        if "system_fingerprint" in self._meta:
            body["system_fingerprint"] = self._meta["system_fingerprint"]
        body["choices"] = [
            {"text": "".join(c.texts), "index": i, "logprobs": c.logprobs, "finish_reason": c.finish_reason}
            for i, c in sorted(self._choices.items())
        ]
        if self._usage is not None:
            body["usage"] = self._usage
        return body

    def _add(self, choice: Any) -> None:
        if not isinstance(choice, Mapping) or type(choice.get("index")) is not int or choice["index"] < 0:
            return self._fail("a choice without a valid index")
        text, logprobs, finish_reason = choice.get("text", ""), choice.get("logprobs"), choice.get("finish_reason")
        if not isinstance(text, str) or not (finish_reason is None or isinstance(finish_reason, str)):
            return self._fail("a choice with a malformed text or finish_reason")
        if not (logprobs is None or isinstance(logprobs, Mapping)):
            return self._fail("a choice with malformed logprobs")
        state = self._choices.setdefault(choice["index"], _Choice())
        state.texts.append(text)
        if finish_reason is not None:
            state.finish_reason = finish_reason
        self._size += len(text)
        if logprobs is not None:
            self._size += len(orjson.dumps(logprobs))
            state.logprobs = _merge_logprobs(state.logprobs, logprobs)
        if self.max_bytes is not None and self._size > self.max_bytes:
            self._fail("larger than the entry bound")
            self._choices.clear()  # stop holding text that will never be stored

    def _check_complete(self) -> None:
        if not self._choices:
            return self._fail("no choices")
        if sorted(self._choices) != list(range(len(self._choices))):
            return self._fail("choice indexes are not 0..n-1")
        if self.expected_choices is not None and len(self._choices) != self.expected_choices:
            return self._fail(f"{len(self._choices)} choices, expected {self.expected_choices}")
        if any(c.finish_reason is None for c in self._choices.values()):
            return self._fail("a choice without finish_reason")

    def _fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason


def _merge_logprobs(merged: dict[str, Any] | None, chunk: Mapping[str, Any]) -> dict[str, Any]:
    result = {} if merged is None else merged
    for name, value in chunk.items():
        existing = result.get(name)
        if isinstance(value, list):
            if isinstance(existing, list):
                existing.extend(value)
            else:
                result[name] = list(value)
        elif name not in result:
            result[name] = value
    return result
