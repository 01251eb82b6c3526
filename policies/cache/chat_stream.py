"""The chat shape of the cache's stream steps: assemble a `chat.completion` from the
`chat.completion.chunk`s of a streamed miss (so it can be stored), and replay a stored
`chat.completion` as chunks (for a streamed hit).

Assembling follows each choice's deltas: the role, the content, the refusal and the reasoning text
(`reasoning_content` as vLLM and DeepSeek send it, `reasoning`) concatenated, each
tool call (by its `index`) named by its first delta and its arguments concatenated, the logprobs'
`content` and `refusal` lists joined, the finish_reason kept; the usage chunk kept. What makes a
stream not storable is what it is for completions (see `assemble`).

Replaying cuts each choice as an upstream would stream it: the role with the first piece, the
reasoning text before the content (one piece per logprob token when the tokens spell the content,
else word-sized pieces), the
refusal, each tool call (named, then its arguments), then an empty delta with the finish_reason;
choices interleaved round-robin; with `include_usage` a final chunk with no choices carries the
usage. Joining the deltas gives the stored message exactly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from policies.cache.assemble import StreamAssembler, _Choice

OBJECT = "chat.completion"
CHUNK = "chat.completion.chunk"
WORD_BOUNDARY = re.compile(r"(?<=\s)(?=\S)")  # as `replay` cuts a completion's text
TEXTS = ("content", "refusal", "reasoning_content", "reasoning")  # a delta's texts, joined as they come
REASONING = ("reasoning_content", "reasoning")


@dataclass(slots=True)
class _Message:
    role: str = "assistant"
    content: list[str] | None = None
    refusal: list[str] | None = None
    reasoning_content: list[str] | None = None
    reasoning: list[str] | None = None
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    logprobs: dict[str, list[Any]] | None = None


class ChatAssembler(StreamAssembler):
    def __init__(self, *, expected_choices: int | None = None, max_bytes: int | None = None) -> None:
        super().__init__(expected_choices=expected_choices, max_bytes=max_bytes)
        self._messages: dict[int, _Message] = {}
        self._service_tier: Any = None

    def feed_event(self, event: Any) -> None:
        super().feed_event(event)
        if isinstance(event, Mapping) and event.get("service_tier") is not None and self._service_tier is None:
            self._service_tier = event["service_tier"]

    def finish(self) -> dict[str, Any] | None:
        self._done = True
        if self.failure is None:
            self._check_complete()
        if self.failure is not None:
            return None
        body: dict[str, Any] = {
            "id": self._meta.get("id"),
            "object": OBJECT,
            "created": self._meta.get("created"),
            "model": self._meta.get("model"),
        }
        if self._meta.get("system_fingerprint") is not None:
            body["system_fingerprint"] = self._meta["system_fingerprint"]
        if self._service_tier is not None:
            body["service_tier"] = self._service_tier
        body["choices"] = [
            {
                "index": index,
                "message": _message(self._messages[index]),
                "logprobs": self._messages[index].logprobs,
                "finish_reason": state.finish_reason,
            }
            for index, state in sorted(self._choices.items())
        ]
        if self._usage is not None:
            body["usage"] = self._usage
        return body

    def _add(self, choice: Any) -> None:
        if not isinstance(choice, Mapping) or type(choice.get("index")) is not int or choice["index"] < 0:
            return self._fail("a choice without a valid index")
        delta, finish_reason, logprobs = choice.get("delta") or {}, choice.get("finish_reason"), choice.get("logprobs")
        if not isinstance(delta, Mapping) or not (finish_reason is None or isinstance(finish_reason, str)):
            return self._fail("a choice with a malformed delta or finish_reason")
        if not (logprobs is None or isinstance(logprobs, Mapping)):
            return self._fail("a choice with malformed logprobs")
        state = self._choices.setdefault(choice["index"], _Choice())
        message = self._messages.setdefault(choice["index"], _Message())
        if finish_reason is not None:
            state.finish_reason = finish_reason
        if isinstance(delta.get("role"), str):
            message.role = delta["role"]
        for name in TEXTS:
            text = delta.get(name)
            if text is None:
                continue
            if not isinstance(text, str):
                return self._fail(f"a delta whose {name} is not a string")
            pieces = getattr(message, name)
            if pieces is None:
                pieces = []
                setattr(message, name, pieces)
            pieces.append(text)
            self._size += len(text)
        for call in delta.get("tool_calls") or ():
            if not self._add_call(message, call):
                return self._fail("a malformed tool call delta")
        if logprobs is not None:
            merged = message.logprobs if message.logprobs is not None else {}
            for name, value in logprobs.items():
                if isinstance(value, list):
                    merged.setdefault(name, []).extend(value)
                    self._size += len(orjson.dumps(value))
                else:
                    merged.setdefault(name, value)
            message.logprobs = merged
        if self.max_bytes is not None and self._size > self.max_bytes:
            self._fail("larger than the entry bound")
            self._messages.clear()
            self._choices.clear()
        return None

    def _add_call(self, message: _Message, call: Any) -> bool:
        if not isinstance(call, Mapping) or type(call.get("index")) is not int:
            return False
        entry = message.tool_calls.setdefault(call["index"], {"arguments": []})
        for name in ("id", "type"):
            if isinstance(call.get(name), str):
                entry.setdefault(name, call[name])
        function = call.get("function") or {}
        if not isinstance(function, Mapping):
            return False
        if isinstance(function.get("name"), str):
            entry.setdefault("name", function["name"])
        arguments = function.get("arguments")
        if arguments is not None:
            if not isinstance(arguments, str):
                return False
            entry["arguments"].append(arguments)
            self._size += len(arguments)
        return True


def _message(message: _Message) -> dict[str, Any]:
    out: dict[str, Any] = {
        "role": message.role,
        "content": None if message.content is None else "".join(message.content),
        "refusal": None if message.refusal is None else "".join(message.refusal),
    }
    for name in REASONING:  # only when the upstream sent it: other answers are stored as before
        pieces = getattr(message, name)
        if pieces is not None:
            out[name] = "".join(pieces)
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": entry.get("id"),
                "type": entry.get("type", "function"),
                "function": {"name": entry.get("name"), "arguments": "".join(entry["arguments"])},
            }
            for _, entry in sorted(message.tool_calls.items())
        ]
    return out


def replay_chat_chunks(response: Mapping[str, Any], *, include_usage: bool = False) -> list[bytes]:
    """The stream payloads (JSON bytes, without `[DONE]`) that reproduce a stored `chat.completion`."""
    envelope: dict[str, Any] = {
        "id": response.get("id"),
        "object": CHUNK,
        "created": response.get("created"),
        "model": response.get("model"),
    }
    for name in ("system_fingerprint", "service_tier"):
        if name in response:
            envelope[name] = response[name]
    choices = sorted(response.get("choices", []), key=lambda c: int(c["index"]))
    deltas = [_deltas(choice) for choice in choices]
    chunks: list[bytes] = []
    for step in range(max(map(len, deltas), default=0)):
        for choice, own in zip(choices, deltas, strict=True):
            if step >= len(own):
                continue
            delta, logprobs = own[step]
            last = step == len(own) - 1
            entry = {
                "index": choice["index"],
                "delta": delta,
                "logprobs": logprobs,
                "finish_reason": choice.get("finish_reason") if last else None,
            }
            event = {**envelope, "choices": [entry]}
            if include_usage:
                event["usage"] = None
            chunks.append(orjson.dumps(event))
    usage = response.get("usage")
    if include_usage and usage is not None:
        chunks.append(orjson.dumps({**envelope, "choices": [], "usage": usage}))
    return chunks


def _deltas(choice: Mapping[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    message = choice.get("message") or {}
    role = message.get("role", "assistant")
    out: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for name in REASONING:  # what the model thought comes before what it says
        if isinstance(message.get(name), str):
            out.append(({"role": role, name: message[name]} if not out else {name: message[name]}, None))
    said = len(out)
    content = message.get("content")
    if isinstance(content, str):
        for piece, logprobs in _content_pieces(content, choice.get("logprobs")):
            out.append(({"role": role, "content": piece} if not out else {"content": piece}, logprobs))
    if len(out) == said:
        out.append(({"role": role, "content": content} if not out else {"content": content}, None))
    if isinstance(message.get("refusal"), str):
        out.append(({"refusal": message["refusal"]}, None))
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        opening = {
            "index": index,
            "id": call.get("id"),
            "type": call.get("type", "function"),
            "function": {"name": function.get("name"), "arguments": ""},
        }
        out.append(({"tool_calls": [opening]}, None))
        if function.get("arguments"):
            out.append(({"tool_calls": [{"index": index, "function": {"arguments": function["arguments"]}}]}, None))
    out.append(({}, None))
    return out


def _content_pieces(content: str, logprobs: Any) -> list[tuple[str, dict[str, Any] | None]]:
    entries = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if isinstance(entries, list) and entries:
        tokens = [entry.get("token") if isinstance(entry, Mapping) else None for entry in entries]
        texts = [token for token in tokens if isinstance(token, str)]
        if len(texts) == len(entries) and "".join(texts) == content:
            return [(token, {"content": [entry], "refusal": None}) for token, entry in zip(texts, entries, strict=True)]
        return [(content, dict(logprobs))]  # tokens do not spell the content: keep both whole
    words = [word for word in WORD_BOUNDARY.split(content) if word]
    return [(word, None) for word in words]
