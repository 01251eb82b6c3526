"""An input redaction, written into the body an Anthropic deployment is sent as it came.

The input guardrails judge the chat view of a Messages request (`chat_guarding`: one decision, one
set of verdicts, whichever deployment answers). When they redacted a text, the native body must
say what the chat view says, with the rest of it (`cache_control`, thinking and its signatures,
fields chat has no place for) as it came. Each text of the body (`gateway.api.messages.texts`)
that is a text the chat view had gets that text's redaction; the others are pieces of a text the
translation joined or re-encoded (system blocks, a tool result's blocks or its `Error: ` prefix, a
`tool_use` input as JSON arguments), and are checked on their own, by the same guard, in one batch:
a deny there refuses the request as a deny on the chat view does, and a redaction of an object key
too (a key cannot be rewritten in place). This runs only for a request whose chat view a check
redacted; the length cap's clamp of `max_tokens` is carried over as well.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.api.messages.texts import BodyText, body_texts
from gateway.pipeline.chat_guarding import FIXED_REDACTED, at_path, violation
from gateway.pipeline.guarding import GuardedCall
from policies.guardrails import InputGuard, RequestFacts, Verdict
from policies.guardrails.guards import Guards


async def redact_native(guards: Guards, guarded: GuardedCall, chat: Mapping[str, Any], body: dict[str, Any]) -> None:
    """Rewrite `body` (the client's Messages body) in place as the input checks rewrote `chat`
    (its chat view); raises the 400 a deny gives."""
    limit = chat.get("max_tokens")
    if limit != body.get("max_tokens"):  # the length cap clamped it
        body["max_tokens"] = limit
    rewrites = guarded.rewrites
    if not rewrites:
        return
    written = set(rewrites.values())
    pieces: list[BodyText] = []
    for text in body_texts(body):
        value = text.value
        redacted = rewrites.get(value)
        if redacted is None:
            if value and value not in written:
                pieces.append(text)
        elif text.fixed:
            raise violation(Verdict("guardrails", "input", "deny", FIXED_REDACTED, field=text.path), guards.policy)
        else:
            text.set(redacted)
    facts = RequestFacts(max_tokens=limit if isinstance(limit, int) else None, context=guarded.facts.context)
    instructions = [text for text in pieces if text.system]
    others = [text for text in pieces if not text.system]
    for guard, group in ((guards.for_instructions(), instructions), (guards.input, others)):
        if group:
            await _redact_pieces(guard, group, facts, guards.policy)


async def _redact_pieces(guard: InputGuard, group: list[BodyText], facts: RequestFacts, policy: str) -> None:
    first: dict[str, BodyText] = {}
    for text in group:
        first.setdefault(text.value, text)
    outcome = await guard.check(list(first), facts)
    if outcome.denied is not None:
        raise violation(at_path(outcome.denied, [text.path for text in first.values()]), policy)
    if not outcome.changed:
        return
    redacted = dict(zip(first, outcome.prompt, strict=True))
    for text in group:
        new = redacted[text.value]
        if new == text.value:
            continue
        if text.fixed:
            raise violation(Verdict("guardrails", "input", "deny", FIXED_REDACTED, field=text.path), policy)
        text.set(new)
