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

import orjson

from gateway.pipeline.guarding import GuardedCall
from gateway.pipeline.native.checks import Checked, Slot, check_slots
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
    slots: list[Slot] = []
    for block in message.get("content") or ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in BLOCK_TEXTS:
            field, text_kind = BLOCK_TEXTS[kind]
            if isinstance(block.get(field), str):
                slots.append(Slot(block, field, text_kind))
        elif kind == "tool_use":
            if isinstance(block.get("name"), str):
                slots.append(Slot(block, "name", "text"))
            slots.append(Slot(block, "input", "json", encoded=True))
    checked = await check_slots(guarded, slots)
    if checked is Checked.DENIED:
        message["content"] = []
        message["stop_reason"], message["stop_sequence"] = STOP_REASONS["content_filter"], None
    elif checked is Checked.SAME:
        return result
    return CompletionResult(orjson.dumps(message), result.body, native=True)
