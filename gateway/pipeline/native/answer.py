"""Output checks on an Anthropic deployment's own answer (native pass-through), rewritten in place.

The texts of a Messages answer the checks read, and as what (`TextKind`, as the chat view's texts
are read by `answer_guarding`): a text block's text is the answer (every check); a thinking
block's text is a text of its own (every check but those that judge the answer itself); a
`tool_use` block's input is JSON (checked as the value it spells, redacted so that it stays JSON)
and its name a whole text. A Messages answer is one choice: a deny withholds all of it (no
content, `stop_reason: "refusal"`, Anthropic's own for a declined answer), or raises the status its
policy names; a redaction rewrites the text where it is, and everything else (ids, signatures,
usage, fields the gateway does not know) stays as it came. An answer the checks leave as it was
goes out byte for byte.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.pipeline.answer_guarding import on_choice, per_choice
from gateway.pipeline.guarding import GuardedCall
from policies.guardrails import GuardrailViolation
from policies.guardrails.base import TextKind
from providers.base import CompletionResult

# A content block's text the checks read: its field, and what kind of text it is.
BLOCK_TEXTS: dict[str, tuple[str, TextKind]] = {"text": ("text", "answer"), "thinking": ("thinking", "text")}
# The reason an answer stops when a check ended it: a deny, or a length cap that truncates.
STOP_REASONS = {"content_filter": "refusal", "length": "max_tokens"}


async def check_native_answer(guarded: GuardedCall, result: CompletionResult) -> CompletionResult:
    """`result` (a native answer) as the output checks leave it; its verdicts join `guarded`'s."""
    if not guarded.output:
        return result
    message = orjson.loads(result.raw)  # the provider read it as a JSON object with its content list
    slots: list[tuple[dict[str, Any], str, TextKind]] = []
    texts: list[str] = []
    for block in message.get("content") or ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in BLOCK_TEXTS:
            field, text_kind = BLOCK_TEXTS[kind]
            if isinstance(block.get(field), str):
                slots.append((block, field, text_kind))
                texts.append(block[field])
        elif kind == "tool_use":
            if isinstance(block.get("name"), str):
                slots.append((block, "name", "text"))
                texts.append(block["name"])
            slots.append((block, "input", "json"))
            texts.append(orjson.dumps(block.get("input", {})).decode())
    one_choice = [0] * len(texts)
    outcome = await guarded.output.check(texts, guarded.facts, [kind for _, _, kind in slots])
    guarded.verdicts += per_choice(outcome.verdicts, one_choice)
    denied = outcome.first_denied
    if denied is not None and outcome.deny_status is not None:
        raise GuardrailViolation(on_choice(denied, one_choice), status=outcome.deny_status)
    if denied is not None:
        message["content"] = []
        message["stop_reason"], message["stop_sequence"] = STOP_REASONS["content_filter"], None
        return CompletionResult(orjson.dumps(message), result.body, native=True)
    changed = False
    for (block, field, _), text, checked in zip(slots, texts, outcome.choices, strict=True):
        if checked.text != text:
            block[field] = orjson.loads(checked.text) if field == "input" else checked.text
            changed = True
    return CompletionResult(orjson.dumps(message), result.body, native=True) if changed else result
