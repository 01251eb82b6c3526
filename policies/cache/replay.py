"""Replay a stored completion as the `data:` payloads of a Completions stream.

Each choice is cut into pieces (one per logprob token when the tokens spell the text exactly, so
each piece carries its own logprobs as upstream streams do; otherwise word-sized pieces), the
choices interleaved round-robin, the last piece of a choice carrying its finish_reason. With
`include_usage`, every chunk has `"usage": null` and a final chunk with no choices carries the
usage, as OpenAI does for `stream_options.include_usage`. The caller frames each payload as
`data: <payload>\\n\\n` and ends with `data: [DONE]`. Joining a choice's pieces gives its stored
text exactly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from policies.cache.chat_stream import replay_chat_chunks
from policies.cache.native_events import STREAMS, replay_events

WORD_BOUNDARY = re.compile(r"(?<=\s)(?=\S)")  # split after whitespace, before the next word
LOGPROB_LISTS = ("tokens", "token_logprobs", "top_logprobs", "text_offset")

Piece = tuple[str, dict[str, Any] | None]  # text, logprobs of that text


def replay_chunks(response: Mapping[str, Any], *, include_usage: bool = False) -> list[bytes]:
    """The stream payloads (JSON bytes, without `[DONE]`) that reproduce `response` (a stored
    `chat.completion` is replayed as `chat.completion.chunk`s: see `chat_stream`; a native stream
    as its events: `native_events`)."""
    if response.get("object") == "chat.completion":
        return replay_chat_chunks(response, include_usage=include_usage)
    if response.get("type") in STREAMS:  # a native stream: its events as they were sent
        return replay_events(response)
    envelope: dict[str, Any] = {
        "id": response.get("id"),
        "object": "text_completion",
        "created": response.get("created"),
        "model": response.get("model"),
    }
    if "system_fingerprint" in response:
        envelope["system_fingerprint"] = response["system_fingerprint"]
    choices = sorted(response.get("choices", []), key=lambda c: int(c["index"]))
    pieces = [_pieces(choice) for choice in choices]
    chunks: list[bytes] = []
    for step in range(max(map(len, pieces), default=0)):
        for choice, own in zip(choices, pieces, strict=True):
            if step >= len(own):
                continue
            text, logprobs = own[step]
            event = {**envelope, "choices": [_choice(choice, text, logprobs, last=step == len(own) - 1)]}
            if include_usage:
                event["usage"] = None
            chunks.append(orjson.dumps(event))
    usage = response.get("usage")
    if include_usage and usage is not None:
        chunks.append(orjson.dumps({**envelope, "choices": [], "usage": usage}))
    return chunks


def _choice(choice: Mapping[str, Any], text: str, logprobs: dict[str, Any] | None, last: bool) -> dict[str, Any]:
    return {
        "text": text,
        "index": choice["index"],
        "logprobs": logprobs,
        "finish_reason": choice.get("finish_reason") if last else None,
    }


def _pieces(choice: Mapping[str, Any]) -> list[Piece]:
    text: str = choice.get("text", "")
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, Mapping):
        by_token = _token_pieces(text, logprobs)
        if by_token is not None:
            return by_token
        return [(text, dict(logprobs))]  # tokens do not spell the text: keep text and logprobs whole
    words = [word for word in WORD_BOUNDARY.split(text) if word]
    return [(word, None) for word in words] or [("", None)]


def _token_pieces(text: str, logprobs: Mapping[str, Any]) -> list[Piece] | None:
    tokens = logprobs.get("tokens")
    if not isinstance(tokens, list) or not tokens or "".join(map(str, tokens)) != text:
        return None
    lists = {name: value for name, value in logprobs.items() if isinstance(value, list) and len(value) == len(tokens)}
    if set(logprobs) - set(lists):
        return None  # a field that cannot be split per token
    return [(token, {name: [value[i]] for name, value in lists.items()}) for i, token in enumerate(tokens)]
