"""A chat answer as a Messages answer: its first choice's reasoning, text and tool calls as
content blocks, `finish_reason` as `stop_reason`, usage in Anthropic's fields.

An Anthropic deployment's own answer (native pass-through) is relayed as it came: `edge`.

`stop_sequence` is known when the upstream says which stop matched (vLLM's `stop_reason`);
otherwise a chat `stop` is `end_turn`. Cached prompt tokens (`prompt_tokens_details.cached_tokens`)
are `cache_read_input_tokens`, and not counted again in `input_tokens`.
"""

from __future__ import annotations

from typing import Any

import orjson

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use"}
STOP_REASONS["content_filter"] = "refusal"


def message_id(chat_id: Any) -> str:
    return f"msg_{chat_id}" if isinstance(chat_id, str) and chat_id else "msg_gateway"


def stop_reason(finish_reason: Any, matched: Any, stops: list[str]) -> tuple[str | None, str | None]:
    """(stop_reason, stop_sequence) for a choice's `finish_reason` (and the stop it matched, if said)."""
    if finish_reason is None:
        return None, None
    if finish_reason == "stop" and isinstance(matched, str) and matched in stops:
        return "stop_sequence", matched
    return STOP_REASONS.get(finish_reason, "end_turn"), None


def usage(chat_usage: Any) -> dict[str, int]:
    prompt = completion = cached = written = 0
    if isinstance(chat_usage, dict):
        prompt = _count(chat_usage.get("prompt_tokens"))
        completion = _count(chat_usage.get("completion_tokens"))
        details = chat_usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            cached = min(_count(details.get("cached_tokens")), prompt)
            # Prompt-cache writes: what an Anthropic deployment reports (`cache_write_tokens`).
            written = min(_count(details.get("cache_write_tokens")), prompt - cached)
    return {
        "input_tokens": prompt - cached - written,
        "output_tokens": completion,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": cached,
    }


def tool_input(arguments: Any) -> Any:
    """A tool call's arguments as the object a `tool_use` block holds ({} for none)."""
    if not arguments:
        return {}
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"arguments": arguments}  # kept, not dropped: what the model wrote


def from_chat(body: dict[str, Any], stops: list[str]) -> dict[str, Any]:
    choices = body.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        content.append({"type": "thinking", "thinking": reasoning, "signature": ""})
    text = message.get("content")
    if isinstance(text, str) and text:
        content.append({"type": "text", "text": text})
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        content.append({"type": "text", "text": refusal})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        content.append(
            {
                "type": "tool_use",
                "id": call.get("id") or "",
                "name": function.get("name") or "",
                "input": tool_input(function.get("arguments")),
            }
        )
    reason, sequence = stop_reason(choice.get("finish_reason"), choice.get("stop_reason"), stops)
    if isinstance(refusal, str) and refusal:
        reason = "refusal"
    return {
        "id": message_id(body.get("id")),
        "type": "message",
        "role": "assistant",
        "model": body.get("model") or "",
        "content": content,
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": usage(body.get("usage")),
    }


def _count(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0
