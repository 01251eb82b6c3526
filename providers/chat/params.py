"""What a translated API can honour of a Chat Completions body: the chat reference for
`providers.completion_params.check_params`, and the values every adapter reads from the body.

As for completions, a parameter at its neutral value asks for nothing and passes everywhere
(`logprobs: false`, `tools: []`, `response_format: {"type": "text"}`, `store: false`…); one that
asks for something the API cannot do is a 400 naming it, unless the deployment drops it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from providers.completion_params import Reference

HANDLED = frozenset(
    {"model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens", "temperature", "top_p"}
    | {"stop", "n"}
)


def _none(value: Any, body: dict[str, Any]) -> bool:
    return value is None


def _falsy(value: Any, body: dict[str, Any]) -> bool:
    return not value


_NEUTRAL: dict[str, Callable[[Any, dict[str, Any]], bool]] = {
    **dict.fromkeys(
        ("frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs", "tools", "store"), _falsy
    ),
    **dict.fromkeys(("metadata", "functions"), _falsy),
    **dict.fromkeys(
        ("seed", "user", "reasoning_effort", "audio", "prediction", "web_search_options", "verbosity"), _none
    ),
    **dict.fromkeys(("safety_identifier", "prompt_cache_key", "function_call"), _none),
    "tool_choice": lambda value, body: value in (None, "auto", "none"),
    "parallel_tool_calls": lambda value, body: value is None or not body.get("tools"),
    "response_format": lambda value, body: value is None or value == {"type": "text"},
    "service_tier": lambda value, body: value in (None, "auto", "default"),
    "modalities": lambda value, body: value in (None, ["text"]),
}
CHAT = Reference("Chat Completions", HANDLED, _NEUTRAL)
CHAT_FIELDS = CHAT.fields


def max_completion_tokens(body: dict[str, Any], default: int | None) -> int | None:
    """`max_completion_tokens`, else the older `max_tokens`, else `default`."""
    for name in ("max_completion_tokens", "max_tokens"):
        if body.get(name) is not None:
            return int(body[name])
    return default


def top_logprobs(body: dict[str, Any]) -> int | None:
    """None without `logprobs: true`; else how many alternatives each token lists (0 to 20)."""
    return int(body.get("top_logprobs") or 0) if body.get("logprobs") else None


def response_format(body: dict[str, Any]) -> str:
    """'text', 'json_object' or 'json_schema'."""
    return str((body.get("response_format") or {}).get("type") or "text")
