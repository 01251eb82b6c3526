"""The prompt and the answer of a request as text, for the logs that keep them (the access log's
`include_bodies`, the request log's): read from the bodies the middleware kept, cut to a length,
and redacted by the guardrails' PII check, so a log hides what a `pii` guardrail would.

Cutting is cheap and may run where the record ends; redacting is not, and runs in the logs' own
thread (the access log's writer, the request log's batches).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from gateway.observability.record import RequestRecord


def cut_bodies(record: RequestRecord, max_chars: int) -> tuple[str, str]:
    """The prompt's and the (non-streamed) answer's text, unredacted, each at most `max_chars` long
    ("" where there is none)."""
    prompt = prompt_text(record.prompt)[:max_chars]
    completion = (record.completion_text or completion_text(record.response_body))[:max_chars]
    return prompt, completion


def prompt_text(raw: Any) -> str:
    """The `prompt` of the request body (bytes as received), as text for the log."""
    if not isinstance(raw, bytes | str):
        return ""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return ""
    prompt = body.get("prompt") if isinstance(body, dict) else None
    messages = body.get("messages") if isinstance(body, dict) else None
    if prompt is None and isinstance(messages, list):  # a chat request: the text of its messages
        return "\n".join(_chat_text(message) for message in messages if isinstance(message, dict))
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and all(isinstance(item, str) for item in prompt):
        return "\n".join(prompt)
    return ""  # token ids: nothing readable to log


def completion_text(raw: bytes | None) -> str:
    """The text of every choice of a JSON completion answer."""
    try:
        body = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return ""
    choices = body.get("choices") if isinstance(body, dict) else None
    texts = [_choice_text(c) for c in choices if isinstance(c, dict)] if isinstance(choices, list) else []
    return "\n".join(text for text in texts if isinstance(text, str))


def _choice_text(choice: dict[str, Any]) -> Any:
    """A completion choice's text, or a chat choice's message content."""
    if "message" in choice:
        return _chat_text(choice["message"]) if isinstance(choice["message"], dict) else None
    return choice.get("text")


def _chat_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def redactor() -> Callable[[str], str]:
    """The guardrails' PII check, in redact mode: the log hides what a `pii` guardrail would."""
    from policies.guardrails.base import RequestFacts
    from policies.guardrails.checks.pii.check import PiiConfig
    from policies.guardrails.engine import CheckSet

    checks = CheckSet([PiiConfig.model_validate({"check": "pii", "action": "redact"})], "output")
    facts = RequestFacts()
    return lambda text: checks.run_sync(text, facts, None).text
