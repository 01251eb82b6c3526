"""The OpenAI `text_completion` shape that translating providers produce, built from neutral parts.

An adapter turns one upstream answer into a `Reply` (or stream events into `Delta`s) indexed within
that call; `completion_body` and `chunk_body` re-index them across calls, as OpenAI indexes
choices for a list of prompts with `n` each (prompt i, sample j → index i*n + j).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

FinishReason = Literal["stop", "length", "content_filter", "tool_calls"]


@dataclass(slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Where the upstream says (the chat shape reports them as `*_tokens_details`): of the completion,
    # the model's reasoning; of the prompt, what its prompt cache held.
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None

    def add(self, other: Usage | None) -> None:
        if other is not None:
            self.prompt_tokens += other.prompt_tokens
            self.completion_tokens += other.completion_tokens
            self.reasoning_tokens = _sum(self.reasoning_tokens, other.reasoning_tokens)
            self.cached_tokens = _sum(self.cached_tokens, other.cached_tokens)

    def as_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function call of a chat answer; in a stream, one piece of it: the first names it (`id`,
    `name`), the rest add `arguments` text. `index` is its position among the message's calls."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(slots=True)
class Choice:
    """One choice of one upstream call (or a stream's delta of it); `index` is its position within
    that call. `logprobs` is in the client API's shape; the chat shape adds tool calls and refusals."""

    index: int
    text: str
    finish_reason: FinishReason | None
    logprobs: dict[str, Any] | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    refusal: str | None = None


@dataclass(slots=True)
class Reply:
    choices: list[Choice]
    usage: Usage | None = None
    model: str | None = None
    system_fingerprint: str | None = None


@dataclass(frozen=True, slots=True)
class ChunkMeta:
    """What every chunk of one translated stream repeats: one id, one creation time, the model."""

    model: str
    id: str = field(default_factory=lambda: new_completion_id())
    created: int = field(default_factory=lambda: int(time.time()))


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


def new_completion_id() -> str:
    return "cmpl-" + secrets.token_hex(12)


def completion_body(replies: Sequence[Reply], bases: Sequence[int], model: str) -> dict[str, Any]:
    """One `text_completion` from the replies of several calls; `bases[k]` is call k's first index."""
    choices = [
        _choice(base + choice.index, choice.text, choice.finish_reason, choice.logprobs)
        for reply, base in zip(replies, bases, strict=True)
        for choice in reply.choices
    ]
    choices.sort(key=lambda item: int(item["index"]))
    usage = Usage()
    for reply in replies:
        usage.add(reply.usage)
    body: dict[str, Any] = {
        "id": new_completion_id(),
        "object": "text_completion",
        "created": int(time.time()),
        "model": next((reply.model for reply in replies if reply.model), model),
        "choices": choices,
        "usage": usage.as_dict(),
    }
    fingerprint = next((reply.system_fingerprint for reply in replies if reply.system_fingerprint), None)
    if fingerprint is not None:
        body["system_fingerprint"] = fingerprint
    return body


def chunk_body(meta: ChunkMeta, choice: Choice, index: int) -> dict[str, Any]:
    return {
        "id": meta.id,
        "object": "text_completion",
        "created": meta.created,
        "model": meta.model,
        "choices": [_choice(index, choice.text, choice.finish_reason, choice.logprobs)],
    }


def usage_chunk_body(meta: ChunkMeta, usage: Usage) -> dict[str, Any]:
    """The last chunk when the client asked `stream_options.include_usage`: no choices, the usage."""
    return {
        "id": meta.id,
        "object": "text_completion",
        "created": meta.created,
        "model": meta.model,
        "choices": [],
        "usage": usage.as_dict(),
    }


def completion_logprobs(tokens: Iterable[TokenLogprob], text_offset: int = 0) -> dict[str, Any]:
    """Completions-style logprobs (parallel lists) from per-token entries. `top_logprobs` holds the
    most likely alternatives and always the sampled token, as the Completions API promises."""
    result: dict[str, list[Any]] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for entry in tokens:
        result["tokens"].append(entry.token)
        result["token_logprobs"].append(entry.logprob)
        top = dict(entry.top)
        top.setdefault(entry.token, entry.logprob)
        result["top_logprobs"].append(top)
        result["text_offset"].append(text_offset)
        text_offset += len(entry.token)
    return result


def _sum(a: int | None, b: int | None) -> int | None:
    return a if b is None else (b if a is None else a + b)


def _choice(index: int, text: str, finish_reason: str | None, logprobs: dict[str, Any] | None) -> dict[str, Any]:
    return {"text": text, "index": index, "logprobs": logprobs, "finish_reason": finish_reason}
