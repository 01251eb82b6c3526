"""The OpenAI `chat.completion` shape (and its `chat.completion.chunk` stream) built from the same
neutral parts as `providers.completion_shape`: `Reply`, `Choice` (with tool calls and refusals),
`Usage`, re-indexed across calls as completions are."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Sequence
from typing import Any

from providers.completion_shape import Choice, ChunkMeta, Reply, TokenLogprob, ToolCall, Usage

OBJECT = "chat.completion"
CHUNK = "chat.completion.chunk"


def new_chat_id() -> str:
    return "chatcmpl-" + secrets.token_hex(12)


def chat_meta(model: str) -> ChunkMeta:
    return ChunkMeta(model, id=new_chat_id())


def chat_body(replies: Sequence[Reply], bases: Sequence[int], model: str) -> dict[str, Any]:
    """One `chat.completion` from the replies of several calls; `bases[k]` is call k's first index."""
    choices = [
        message_choice(base + choice.index, choice)
        for reply, base in zip(replies, bases, strict=True)
        for choice in reply.choices
    ]
    choices.sort(key=lambda item: int(item["index"]))
    usage = Usage()
    for reply in replies:
        usage.add(reply.usage)
    body: dict[str, Any] = {
        "id": new_chat_id(),
        "object": OBJECT,
        "created": int(time.time()),
        "model": next((reply.model for reply in replies if reply.model), model),
        "choices": choices,
        "usage": chat_usage(usage),
    }
    fingerprint = next((reply.system_fingerprint for reply in replies if reply.system_fingerprint), None)
    if fingerprint is not None:
        body["system_fingerprint"] = fingerprint
    return body


def chat_chunk_body(meta: ChunkMeta, choice: Choice, index: int, first: bool) -> dict[str, Any]:
    """The chunk of one delta; the first of each choice carries the assistant's role."""
    delta: dict[str, Any] = {"role": "assistant"} if first else {}
    if choice.text or (first and not choice.tool_calls):
        delta["content"] = choice.text
    if choice.refusal:
        delta["refusal"] = choice.refusal
    if choice.tool_calls:
        delta["tool_calls"] = [_tool_call(call) for call in choice.tool_calls]
    entry = {"index": index, "delta": delta, "logprobs": choice.logprobs, "finish_reason": choice.finish_reason}
    return {"id": meta.id, "object": CHUNK, "created": meta.created, "model": meta.model, "choices": [entry]}


def chat_usage_chunk_body(meta: ChunkMeta, usage: Usage) -> dict[str, Any]:
    """The last chunk when the client asked `stream_options.include_usage`: no choices, the usage."""
    return {
        "id": meta.id,
        "object": CHUNK,
        "created": meta.created,
        "model": meta.model,
        "choices": [],
        "usage": chat_usage(usage),
    }


def chat_usage(usage: Usage) -> dict[str, Any]:
    body: dict[str, Any] = usage.as_dict()
    if usage.reasoning_tokens is not None:
        body["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    if usage.cached_tokens is not None:
        body["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    return body


def chat_logprobs(tokens: Iterable[TokenLogprob], top: int) -> dict[str, Any]:
    """Chat-style logprobs: per token its logprob, UTF-8 bytes and its `top` most likely
    alternatives (exactly those, most likely first: the sampled token only if it is among them)."""
    content = []
    for entry in tokens:
        alternatives = sorted(entry.top, key=lambda item: item[1], reverse=True)[:top]
        content.append(
            {
                **_token(entry.token, entry.logprob),
                "top_logprobs": [_token(token, logprob) for token, logprob in alternatives],
            }
        )
    return {"content": content, "refusal": None}


def _token(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8", "surrogatepass"))}


def message_choice(index: int, choice: Choice) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": choice.text if choice.text or not (choice.tool_calls or choice.refusal) else None,
        "refusal": choice.refusal,
    }
    if choice.tool_calls:
        message["tool_calls"] = [_tool_call(call, indexed=False) for call in choice.tool_calls]
    return {"index": index, "message": message, "logprobs": choice.logprobs, "finish_reason": choice.finish_reason}


def _tool_call(call: ToolCall, indexed: bool = True) -> dict[str, Any]:
    """A whole call, or a stream's piece of one (OpenAI's tool-call delta: indexed, named once,
    then arguments)."""
    function: dict[str, Any] = {"arguments": call.arguments}
    if call.name is not None:
        function = {"name": call.name, **function}
    entry: dict[str, Any] = {"index": call.index} if indexed else {}
    if call.id is not None:
        entry.update(id=call.id, type="function")
    entry["function"] = function
    return entry
