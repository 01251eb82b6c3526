"""Sample completions for the cache tests, shaped like OpenAI's `text_completion` (see the seeds)."""

from __future__ import annotations

from typing import Any

import orjson


def completion(
    *texts: str, finish_reason: str | None = "stop", usage: bool = True, logprobs: bool = False, model: str = "m"
) -> dict[str, Any]:
    """A non-streamed body with one choice per text (index = position), optionally with logprobs."""
    choices = []
    for index, text in enumerate(texts or ("Hello there, world.",)):
        choices.append(
            {
                "text": text,
                "index": index,
                "logprobs": token_logprobs(text) if logprobs else None,
                "finish_reason": finish_reason,
            }
        )
    body: dict[str, Any] = {"id": "cmpl-1", "object": "text_completion", "created": 1700000000, "model": model}
    body["choices"] = choices
    if usage:
        body["usage"] = {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10}
    return body


def token_logprobs(text: str) -> dict[str, Any]:
    """Logprobs for `text` cut into 3-character tokens, with absolute text offsets."""
    tokens = [text[i : i + 3] for i in range(0, len(text), 3)]
    offsets = [i * 3 for i in range(len(tokens))]
    return {
        "tokens": tokens,
        "token_logprobs": [-0.25 * (i + 1) for i in range(len(tokens))],
        "top_logprobs": [{token: -0.25 * (i + 1), " x": -3.5} for i, token in enumerate(tokens)],
        "text_offset": offsets,
    }


def raw(body: dict[str, Any]) -> bytes:
    return orjson.dumps(body)


def openai_stream(body: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The chunk events an OpenAI-style upstream sends for `body`, per choice (one list each):
    one chunk per token (or per 4 characters without logprobs), then an empty chunk with the
    finish_reason (and empty logprobs lists). The caller adds `usage_event` when it wants one."""
    per_choice = []
    for choice in body["choices"]:
        events = []
        logprobs = choice["logprobs"]
        if logprobs is not None:
            for i, token in enumerate(logprobs["tokens"]):
                piece = {name: [values[i]] for name, values in logprobs.items()}
                events.append(_event(body, choice["index"], token, piece, None))
        else:
            text = choice["text"]
            for start in range(0, len(text), 4):
                events.append(_event(body, choice["index"], text[start : start + 4], None, None))
        last_logprobs: dict[str, list[Any]] | None = None if logprobs is None else {name: [] for name in logprobs}
        events.append(_event(body, choice["index"], "", last_logprobs, choice["finish_reason"]))
        per_choice.append(events)
    return per_choice


def usage_event(body: dict[str, Any]) -> dict[str, Any]:
    return {**_envelope(body), "choices": [], "usage": body["usage"]}


def _envelope(body: dict[str, Any]) -> dict[str, Any]:
    return {"id": body["id"], "object": "text_completion", "created": body["created"], "model": body["model"]}


def _event(body: dict[str, Any], index: int, text: str, logprobs: Any, finish: str | None) -> dict[str, Any]:
    choice = {"text": text, "index": index, "logprobs": logprobs, "finish_reason": finish}
    return {**_envelope(body), "choices": [choice]}
